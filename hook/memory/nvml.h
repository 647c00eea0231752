/* NVML's memory queries in the pod's view (nvml.c), as entry.c's dlsym
 * hands them out. */
#ifndef GMT_HOOK_NVML_H
#define GMT_HOOK_NVML_H

/* What dlsym hands out for `name`, whose real answer was real: the hook's
 * wrapper when name is one that nvml.c wraps and real lives in
 * libnvidia-ml (real is then the one the wrapper calls), else real. For
 * names that start with "nvml" only: never reached while a sanitizer
 * runtime starts. */
void *gmt__nvml_dlsym(const char *name, void *real);

#endif
