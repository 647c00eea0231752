# Where the tracer's vmlinux.h comes from. Included by bpf/ and server/trace
# (in whichever order the tree adds them) so that both agree.
#
# -DGMT_VMLINUX_H=<file> uses a vmlinux.h made elsewhere (a build machine
# without kernel BTF); otherwise it is generated from this kernel's
# /sys/kernel/btf/vmlinux. With neither, GMT_TRACE_ENABLED is OFF and the
# tracer (bpf/, server/trace, `gmt trace`) is left out of the build, said
# once at configure time.
set(GMT_VMLINUX_H "" CACHE FILEPATH "a pre-generated vmlinux.h for the eBPF tracer (default: from /sys/kernel/btf/vmlinux)")
set(GMT_KERNEL_BTF "/sys/kernel/btf/vmlinux" CACHE FILEPATH "kernel BTF to generate vmlinux.h from")
if(GMT_VMLINUX_H OR EXISTS "${GMT_KERNEL_BTF}")
  set(GMT_TRACE_ENABLED ON)
else()
  set(GMT_TRACE_ENABLED OFF)
endif()
