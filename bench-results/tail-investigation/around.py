import re, sys
f, t0rel, span = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
hdr = re.compile(r'^M=(-?\d+) P=(-?\d+) G=(-?\d+) (\w+) Time=(\d+)(.*)$')
t0 = None
for line in open(f):
    m = hdr.match(line)
    if not m: continue
    t = int(m.group(5))
    if t0 is None: t0 = t
    r = (t - t0) / 1e9
    if t0rel - 0.001 <= r <= t0rel + span:
        print("%.6f M=%s P=%s G=%s %s %s" % (r, m.group(1), m.group(2), m.group(3), m.group(4), m.group(6).strip()[:110]))
