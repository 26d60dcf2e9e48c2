"""select(2) on two endpoints' data files.

Usage: python3 select_data.py DOMAIN. Endpoint a connects to passive
endpoint l; b is the endpoint made for the request. select must say a data
file is readable only while a message for it is there: neither before
traffic, only b after a sends, neither once b has read it, only a after b
sends; and a select blocked before the message is sent (by a child
process) must wake when it arrives. Prints one line per step; exits 1 on
the first wrong answer.
"""
import os
import select
import sys
import time


def main(dom):
    p = lambda *e: os.path.join(dom, *e)

    def ctl(obj, cmd):
        with open(p(obj, "ctl"), "w") as f:
            f.write(cmd + "\n")

    for d in ("eq/ev", "eq/ea", "cq/c", "pep/l", "ep/a"):
        os.mkdir(p(d))
    ctl("pep/l", "bind eq ev")
    ctl("pep/l", "listen 127.0.0.1:0")
    addr = open(p("pep", "l", "local")).read().strip()
    for c in ("bind eq ea", "bind cq c send,recv", "enable", "connect " + addr):
        ctl("ep/a", c)
    b = open(p("pep", "l", "listen")).read().strip()
    for c in ("bind eq ev", "bind cq c send,recv", "enable", "accept"):
        ctl("ep/" + b, c)
    open(p("eq", "ea", "events")).read()  # a's "connected"

    fa = os.open(p("ep", "a", "data"), os.O_RDWR)
    fb = os.open(p("ep", b, "data"), os.O_RDWR)
    name = {fa: "a", fb: "b"}
    failed = False

    def expect(step, want, timeout=0.3):
        nonlocal failed
        r, _, _ = select.select([fa, fb], [], [], timeout)
        got = sorted(name[fd] for fd in r)
        ok = got == sorted(want)
        failed |= not ok
        print(f"{step}: readable={','.join(got) or '-'} {'ok' if ok else 'WRONG, want ' + (','.join(want) or '-')}")

    expect("before traffic", [])
    os.write(fa, b"to b")
    expect("after a sends", ["b"], 5)
    print("b reads", os.pread(fb, 100, 0))
    expect("after b reads", [])
    os.write(fb, b"to a")
    expect("after b sends", ["a"], 5)
    print("a reads", os.pread(fa, 100, 0))
    expect("after a reads", [])

    pid = os.fork()
    if pid == 0:
        time.sleep(0.5)
        os.write(fa, b"late")
        os._exit(0)
    t0 = time.monotonic()
    expect("blocked select, a sends 0.5 s later", ["b"], 10)
    waited = time.monotonic() - t0
    os.waitpid(pid, 0)
    woke = 0.4 <= waited < 5
    failed |= not woke
    print(f"woke after {waited:.2f} s {'ok' if woke else 'WRONG'}")
    print("b reads", os.pread(fb, 100, 0))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main(sys.argv[1])
