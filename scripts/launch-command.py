#!/usr/bin/env python3
"""launch-command.py: runs a command as a client of one pod, as Gemini's
launch-command.py did: under the hook (LD_PRELOAD=libgmthook.so, the ASan
runtime first for a sanitized build) with GMT_PMGR naming the pod's
manager. The pod manager's address is the one launch-backend.py gives it
(--base-port plus the pod's position in resource-config.txt): its ipc
socket in --run-dir when it listens there (the kernel names an ipc caller
at once), else its loopback port; or --pmgr.

It execs `gmt run --pod NAME --pmgr URL -- CMD`, which finds the hook and
sets the environment (docs/devices.md, "gmt run") and then execs CMD: CMD
keeps this pid, and its signals and exit code are its own. gmt run asks
gmt-schd about the pod at $GMT_SCHD when it is set (as every gmt command
does), else at the settings file's address or ipc:///run/gmt/schd.sock. Python 3
standard library only; docs/operators.md.

  launch-command.py --pod NAME [--base-port N] [--run-dir DIR] [-c FILE | --pmgr URL] -- CMD [ARGS...]
"""
import argparse
import os
import sys

sys.dont_write_bytecode = True  # nothing written beside the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launchlib import (DEFAULT_BASE_PORT, DEFAULT_RUN_DIR, LaunchError,  # noqa: E402
                       find_program, listening, pod_names, pod_port, tcp_url)

PROG = "launch-command"
DEFAULT_CONFIG = "/etc/gmt/resource-config.txt"


def parse_args(argv):
    if "--" in argv:
        i = argv.index("--")
        argv, cmd = argv[:i], argv[i + 1:]
    else:
        cmd = None
    p = argparse.ArgumentParser(
        prog="launch-command.py",
        usage="%(prog)s --pod NAME [--base-port N] [--run-dir DIR] [-c FILE | --pmgr URL] "
        "-- CMD [ARGS...]",
        description="Runs CMD under gmt's hook in pod NAME (exec: CMD's pid, signals and exit "
        "code are its own). The pod's manager is at 127.0.0.1:(--base-port + the pod's "
        "position in -c FILE), as launch-backend.py starts it, or at --pmgr URL. gmt is "
        "found through GMT_BUILD_DIR, else on PATH and where `make install` puts it; it asks "
        "gmt-schd about the pod at $GMT_SCHD when set.",
        epilog="Exit: CMD's; 1 gmt or the pod manager not found; 2 bad usage or a pod the "
        "config does not list; 126/127 CMD cannot be run / not found.")
    p.add_argument("--pod", required=True, metavar="NAME", help="the pod CMD runs in")
    p.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT, metavar="N",
                   help="launch-backend.py's --base-port (default %(default)s)")
    p.add_argument("--run-dir", default=DEFAULT_RUN_DIR, metavar="DIR",
                   help="launch-backend.py's socket folder: the pod manager's ipc socket "
                   "DIR/pmgr-PORT.sock is used when it listens (default %(default)s)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("-c", "--config", metavar="FILE",
                   help="resource-config.txt: the pod's position there gives its port "
                   "(default %s when it exists)" % DEFAULT_CONFIG)
    g.add_argument("--pmgr", metavar="URL", help="the pod manager's address, as given")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if cmd is None:
        cmd = args.cmd
    elif args.cmd:
        p.error("unexpected %s before '--'" % " ".join(args.cmd))
    if not cmd:
        p.error("no command given: launch-command.py --pod NAME [...] -- CMD [ARGS...]")
    if args.pmgr and args.base_port != DEFAULT_BASE_PORT:
        p.error("--base-port means nothing with --pmgr")
    if not args.pmgr and not args.config:
        if not os.path.exists(DEFAULT_CONFIG):
            p.error("give -c FILE (resource-config.txt: the pod's position there gives its "
                    "port) or --pmgr URL (%s does not exist)" % DEFAULT_CONFIG)
        args.config = DEFAULT_CONFIG
    return args, cmd


def pmgr_url(args):
    if args.pmgr:
        return args.pmgr, "--pmgr"
    names = pod_names(args.config)
    port = pod_port(names, args.pod, args.base_port, args.config)
    whence = "%s's position %d in %s plus --base-port %d" % (
        args.pod, names.index(args.pod), args.config, args.base_port)
    ipc = "ipc://" + os.path.join(os.path.abspath(args.run_dir), "pmgr-%d.sock" % port)
    if listening(ipc):
        return ipc, whence + ", in --run-dir"
    return tcp_url(port), whence


def main(argv):
    args, cmd = parse_args(argv)
    try:
        gmt = find_program("gmt")
        url, whence = pmgr_url(args)
        # The hook runs a process on unhooked (saying so once) when no pod
        # manager answers: refuse here instead, before CMD starts outside
        # its pod's quota.
        if url.startswith(("tcp://", "ipc://")) and not listening(url):
            raise LaunchError("nothing listens on %s (pod '%s''s manager, from %s): is "
                              "launch-backend.py running, with these ports?"
                              % (url, args.pod, whence))
    except LaunchError as e:
        print("%s: %s" % (PROG, e), file=sys.stderr, flush=True)
        return e.code
    argv = [gmt, "run", "--pod", args.pod, "--pmgr", url, "--"] + cmd
    try:
        os.execv(gmt, argv)
    except OSError as e:
        print("%s: cannot run %s: %s" % (PROG, gmt, e.strerror), file=sys.stderr, flush=True)
        return 126
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
