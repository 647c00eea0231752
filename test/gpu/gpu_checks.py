"""The table the GPU checks print: each check's value against what was
wanted, ok or FAIL, and an exit code that fails when any failed."""
import sys


class Checks:
    def __init__(self):
        self.rows, self.bad = [], []

    def check(self, what, value, want, ok):
        self.rows.append((what, value, want, "ok" if ok else "FAIL"))
        if not ok:
            self.bad.append(what)

    def finished(self, prog, timeout=60):
        """Lets prog finish; its exit code is a check (stderr shown on failure)."""
        rc, err = prog.finish(timeout=timeout)
        self.check("job exit code", rc, 0, rc == 0)
        if rc != 0:
            print(err[-3000:], file=sys.stderr)

    def report(self, title):
        """Prints the table under title; returns the exit code."""
        print(title)
        print("%-34s %16s %16s  %s" % ("check", "seen", "want", ""))
        for what, value, want, verdict in self.rows:
            print("%-34s %16s %16s  %s" % (what, value, want, verdict))
        if self.bad:
            print("FAILED: " + ", ".join(self.bad))
            return 1
        return 0
