/* libFuzzer target: a trace dump (.json or .gmtz, told apart by content)
 * as `gmt trace --load` reads it (gmt_trace_load_buf), then the readers a
 * loaded history answers. */
#include <stdint.h>
#include <stdlib.h>

#include "dump.h"
#include "gmt_error.h"
#include "memhistory.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  gmt_memhistory_t *mh = NULL;
  gmt_trace_meta_t meta;
  if (gmt_trace_load_buf(data, size, &mh, &meta) != 0) {
    if (mh)
      abort();
    return 0;
  }
  gmt_alloc_info_t spots[4];
  (void)gmt_memhistory_hotspots(mh, 4, spots);
  (void)gmt_memhistory_coldspots(mh, 4, spots);
  gmt_memhistory_totals_t t;
  gmt_memhistory_totals(mh, &t);
  gmt_memhistory_free(mh);
  return 0;
}
