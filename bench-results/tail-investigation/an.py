import re, sys, collections
f = sys.argv[1]
hdr = re.compile(r'^M=(-?\d+) P=(-?\d+) G=(-?\d+) (\w+) Time=(\d+)(.*)$')
st = re.compile(r'GoID=(\d+) (\w+)->(\w+) Reason="([^"]*)"')
pst = re.compile(r'ProcID=(\d+) (\w+)->(\w+)')
events = []  # (time, M,P,G, kind, rest, stacklines)
cur = None
for line in open(f):
    m = hdr.match(line)
    if m:
        cur = [int(m.group(5)), int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4), m.group(6), []]
        events.append(cur)
    elif cur is not None:
        cur[6].append(line.strip())
loopG = set()
for e in events:
    if e[4] == 'StateTransition' and any('resp.(*loop).run' in s for s in e[6]):
        m = st.search(e[5])
        if m: loopG.add(int(m.group(1)))
loopG = {g for g in loopG if any(e[4]=="StateTransition" and ("GoID=%d " % g) in e[5] and "resp.(*loop).wait" in " ".join(e[6]) for e in events)}
print("loop goroutines:", sorted(loopG))
t0 = events[0][0]; tend = events[-1][0]
dur = (tend - t0) / 1e9
state = {}; since = {}
gaps = collections.defaultdict(list)  # per g: (kind, dur_ns, who)
pstate = {}; idleP = set()
# for each loop g waiting interval: record duration, and who woke it; also whether a P was idle at any time during the wait
waits = []
for e in events:
    t, M, P, G, kind, rest, stk = e
    if kind != 'StateTransition': continue
    m = pst.search(rest)
    if m and 'GoID' not in rest:
        p = int(m.group(1)); to = m.group(3)
        if to == 'Idle': idleP.add(p)
        else: idleP.discard(p)
        # note idle-ness for any waiting loop g
        if to == 'Idle':
            for g in loopG:
                if state.get(g) in ('Waiting', 'Runnable'):
                    pass
        continue
    m = st.search(rest)
    if not m: continue
    g = int(m.group(1)); fr, to, why = m.group(2), m.group(3), m.group(4)
    if g not in loopG: continue
    if fr in ('Waiting', 'Runnable') and g in since:
        d = t - since[g]
        who = 'P=%d G=%d' % (P, G)
        waits.append((g, fr, d, who, since[g]-t0, state.get(('why', g), '')))
    state[g] = to; since[g] = t
    if to == 'Waiting': state[('why', g)] = why
print("trace span %.2fs" % dur)
for kind in ('Waiting', 'Runnable'):
    ds = [w for w in waits if w[1] == kind]
    ds.sort(key=lambda w: -w[2])
    n = len(ds)
    big = [w for w in ds if w[2] > 5e6]
    print("%s: n=%d  >1ms=%d >5ms=%d >10ms=%d  max=%.2fms  total>1ms=%.1fms" % (kind, n, sum(w[2] > 1e6 for w in ds), len(big), sum(w[2] > 10e6 for w in ds), ds[0][2]/1e6 if ds else 0, sum(w[2] for w in ds if w[2] > 1e6)/1e6))
    who = collections.Counter()
    for w in ds:
        if w[2] > 1e6:
            who[('P=-1' if w[3].startswith('P=-1') else 'P>=0,G=-1' if w[3].endswith('G=-1') else 'by a goroutine', w[5])] += 1
    print("   ended (waits >1ms) by:", dict(who))
    for w in ds[:8]:
        print("   g=%d %.2fms at +%.3fs woken %s reason=%s" % (w[0], w[2]/1e6, w[4]/1e9, w[3], w[5]))

# P idle overlap with long parks, and which P the other loop was running on
idle_iv = collections.defaultdict(list)  # p -> [(start,end)]
ist = {}
run_iv = collections.defaultdict(list)  # g -> [(start,end,P)]
rst = {}
for e in events:
    t, M, P, G, kind, rest, stk = e
    if kind != 'StateTransition': continue
    m = pst.search(rest)
    if m and 'GoID' not in rest:
        p = int(m.group(1)); fr, to = m.group(2), m.group(3)
        if to == 'Idle': ist[p] = t
        elif fr == 'Idle' and p in ist: idle_iv[p].append((ist.pop(p), t))
        continue
    m = st.search(rest)
    if not m: continue
    g = int(m.group(1)); fr, to = m.group(2), m.group(3)
    if g not in loopG: continue
    if to == 'Running': rst[g] = (t, P)
    elif fr == 'Running' and g in rst: s, p = rst.pop(g); run_iv[g].append((s, t, p))
def overlap(ivs, a, b):
    return sum(max(0, min(b, y) - max(a, x)) for x, y, *_ in ivs)
print("\nparks >5ms: dur, idle-P time during it, other loop's running time and on which P")
tot_idle = 0; tot = 0
for w in sorted([w for w in waits if w[1] == 'Waiting' and w[2] > 5e6], key=lambda w: w[4]):
    g, _, d, who, s, _r = w
    a = s + t0; b = a + d
    idle = sum(overlap(idle_iv[p], a, b) for p in idle_iv)
    other = [h for h in loopG if h != g][0]
    orun = [(x, y, p) for x, y, p in run_iv[other] if y > a and x < b]
    oruntime = overlap(orun, a, b)
    ps = collections.Counter(p for *_, p in orun)
    tot_idle += idle; tot += d
    print("  g=%d %.1fms at +%.3fs woken by %s: P idle %.1fms (%.0f%%); other loop ran %.1fms in %d stretches on P %s" % (g, d/1e6, s/1e9, who, idle/1e6, 100*idle/d, oruntime/1e6, len(orun), dict(ps)))
print("total: parks>5ms %.1fms, P idle during them %.1fms (%.0f%%)" % (tot/1e6, tot_idle/1e6, 100*tot_idle/max(tot,1)))
# longest single running stretch of each loop
for g in loopG:
    ds = sorted((y - x for x, y, p in run_iv[g]), reverse=True)
    print("loop g=%d: %d running stretches, longest %s ms" % (g, len(ds), ["%.1f" % (d/1e6) for d in ds[:5]]))
