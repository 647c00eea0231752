/* Call sites: which module and function a return address in a traced
 * process belongs to, from the process's mappings (procmaps.h) and the
 * modules' ELF symbol tables (libelf; .symtab and .dynsym), and where a
 * module's function is (the probe manager skips entry points a driver
 * lacks).
 *
 * Not thread-safe: one symbolizer belongs to one event handler. Large
 * symbol tables are read on a thread of the symbolizer's own, so that
 * the handler does not wait for them (symbols.c says which). */
#ifndef GMT_TRACE_SYMBOLS_H
#define GMT_TRACE_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memhistory.h"
#include "procmaps.h"

/* ---- one ELF file ---- */

typedef struct gmt_elf gmt_elf_t;

int gmt_elf_open(const char *path, gmt_elf_t **out);
/* The segments now, and the symbols too unless the file is larger than
 * syms_max: then *later_fd is an open descriptor of it (else -1), for
 * gmt_elf_load_symbols(), and until that has run the functions are not
 * known (gmt_elf_symbolize() says none, gmt_elf_func_offset() -EAGAIN). */
int gmt_elf_open_some(const char *path, uint64_t syms_max, gmt_elf_t **out, int *later_fd);
/* Reads e's symbols from fd, which it closes; on any thread, once. */
void gmt_elf_load_symbols(gmt_elf_t *e, int fd);
void gmt_elf_close(gmt_elf_t *e);
/* Where a function's code is in the file (what a uprobe is placed by). */
int gmt_elf_func_offset(const gmt_elf_t *e, const char *name, uint64_t *off);
/* A file offset to the ELF virtual address it is loaded at. */
int gmt_elf_off_to_vaddr(const gmt_elf_t *e, uint64_t off, uint64_t *vaddr);
/* "function+0x12" for a virtual address; false when no function holds it. */
bool gmt_elf_symbolize(const gmt_elf_t *e, uint64_t vaddr, char *buf, size_t len);

/* ---- addresses in processes ---- */

typedef struct gmt_symbolizer gmt_symbolizer_t;

/* Addresses are placed in maps, which the caller owns (and loads, forks
 * and forgets processes in) and which outlives s. */
int gmt_symbolizer_new(gmt_symbolizer_t **out, gmt_procmaps_t *maps);
void gmt_symbolizer_free(gmt_symbolizer_t *s);

/* The call site in a user stack (return addresses, innermost first): the
 * first frame outside the driver, the CUDA runtime, the hook and libc, or
 * frame 0 when every frame is in them. */
void gmt_symbolizer_site(gmt_symbolizer_t *s, uint32_t pid, const uint64_t *stack, size_t n,
                         gmt_alloc_site_t *site);
/* One address. -ENOENT when no file-backed mapping holds it (site->pc is
 * still set). */
int gmt_symbolizer_resolve(gmt_symbolizer_t *s, uint32_t pid, uint64_t pc, gmt_alloc_site_t *site);

#endif
