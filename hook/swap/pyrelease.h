/* PyTorch's cached blocks given back before a move out (issue 12, item 4;
 * docs/tiers.md, "PyTorch's cache"). PyTorch keeps freed device memory in
 * its caching allocator; a swap or um process asked to make room would
 * move those unused blocks out and back like live ones. So before such a
 * move the hook asks PyTorch to release them, as torch.cuda.empty_cache()
 * does, through Python's own API found with dlsym (no link to Python or
 * libtorch: PyTorch 2.11 exports no emptyCache of its own).
 *
 * Python code runs only with the GIL, which a program thread may hold
 * while it waits for its token: the call runs on a thread of its own, and
 * the reporter waits for it at most GMT_TORCH_RELEASE_MS (default 200),
 * then moves out what is left; a release still waiting for the GIL is not
 * asked again. GMT_TORCH_EMPTY_CACHE=0 turns it off. */
#ifndef GMT_HOOK_PYRELEASE_H
#define GMT_HOOK_PYRELEASE_H

/* Asks PyTorch to release its cached blocks and waits, bounded, for it:
 * 1 when a release ran to its end, 0 when there is nothing to ask (no
 * Python, turned off) or it is still waiting for the GIL past the bound,
 * -1 when the Python code failed (said once). */
int gmt__pyrelease_cached(void);

#endif
