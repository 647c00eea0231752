/* The fake driver's cuGetProcAddress table, exposed for tests: which
 * exported symbol a (name, version, flags) request resolves to. Both
 * functions are exported from the fake libcuda.so.1 only. */
#ifndef GMT_FAKECUDA_SYMBOLS_H
#define GMT_FAKECUDA_SYMBOLS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Resolve base name `name` (e.g. "cuMemAlloc") as cuGetProcAddress_v2 would
 * at CUDA version `version` with `flags` (CU_GET_PROC_ADDRESS_*). Returns a
 * CUdriverProcAddressQueryResult: 0 found (*sym_name is the exported symbol,
 * e.g. "cuMemAlloc_v2", and *addr, if addr is not NULL, its address), 1 no
 * such name, 2 the version is too low for every variant. */
int gmt_fake_lookup(const char *name, int version, unsigned long long flags, const char **sym_name,
                    void **addr);

/* Entry i of the table (0-based), NULL past the end: its base name, the
 * first version it answers for, and the per-thread-stream variant, if any. */
const char *gmt_fake_symbol_at(size_t i, const char **base, int *version, const char **pt_sym);

#ifdef __cplusplus
}
#endif
#endif
