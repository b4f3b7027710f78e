#!/usr/bin/env python3
"""Splits the approved-command path of BenchmarkROS_ApprovedCommandLatency
along its critical path, from a `go test -trace` of it.

Usage: go tool trace -d=parsed trace.out | scripts/bench-trace.py [SKIP]

The benchmark marks each sample in the trace (trace.Log "t0 <i>" before
the HTTP call, "goal <i> <ns>" with the goal's arrival at the subscriber as
an offset from t0). For each sample this finds the goroutine that handled
the HTTP request (a stack through toolapi.(*Server).handleCall) and the one
the runner created for the task (actions.(*Runner).run), and the moment the
latter handed the goal to goroslib (a stack through Publisher.Write or the
rosaction client), and cuts the sample into:

  1 client → handler runnable     HTTP client, loopback, netpoll
  2 handler → run goroutine       read, decode, validate, plan, Submit's
                                  commits, up to `go r.run`
  3 run goroutine → goal published  its start, the gate, the Executing
                                  commit, the driver
  4 publish → subscriber callback goroslib, TCPROS, the watcher

and splits 2 and 3 by the goroutine's state: running, runnable (waiting
for a CPU), fsync, other SQLite file I/O, waiting for the store's one
write connection, blocked. It also counts the fsyncs of every goroutine
before each goal by caller (a synchronous transition, the asynchronous
writer's batch, idempotency). SKIP (default 1) drops the first samples:
the b.N=1 round the testing package runs first.
"""
import bisect
import re
import statistics as st
import sys
from collections import defaultdict

HDR = re.compile(r'^M=(-?\d+) P=(-?\d+) G=(-?\d+) (\w+) Time=(\d+)(.*)$')
TRN = re.compile(r'GoID=(\d+) (\w+)->(\w+) Reason="(.*)"')
MSG = re.compile(r'Message="(.*)"')

# An event: [time, G (the goroutine that emitted it), kind, goid, from,
# to, reason, transition stack, stack, log message]; stacks are function
# names, innermost first.
T, G, KIND, GOID, FROM, TO, REASON, TSTACK, STACK, MSGF = range(10)


def read_events(f):
    events, cur, section = [], None, None
    for line in f:
        if line.startswith('M='):
            if cur is not None:
                events.append(cur)
            cur, section = None, None
            m = HDR.match(line)
            if not m or m.group(4) not in ('StateTransition', 'Log'):
                continue
            t, g, rest = int(m.group(5)), int(m.group(3)), m.group(6)
            if m.group(4) == 'Log':
                lm = MSG.search(rest)
                cur = [t, g, 'Log', None, None, None, None, [], [], lm.group(1) if lm else '']
            else:
                tm = TRN.search(rest)
                if tm:
                    cur = [t, g, 'ST', int(tm.group(1)), tm.group(2), tm.group(3), tm.group(4), [], [], None]
        elif cur is not None:
            if line.startswith('TransitionStack='):
                section = TSTACK
            elif line.startswith('Stack='):
                section = STACK
            elif section and line.startswith('\t') and not line.startswith('\t\t'):
                if len(cur[section]) < 40:
                    cur[section].append(line.strip().split(' @ ')[0])
    if cur is not None:
        events.append(cur)
    events.sort(key=lambda e: e[T])
    return events


def has(stack, s):
    return any(s in f for f in stack)


def classify(state, stack, reason):
    if state == 'Syscall':
        if has(stack, 'Xfsync') or has(stack, 'fdatasync'):
            return 'fsync'
        if has(stack, 'libc.'):
            return 'sqlite file I/O'
        return 'other syscall'
    if state == 'Runnable':
        return 'runnable (waiting for a CPU)'
    if state == 'Waiting':
        if has(stack, 'database/sql.(*DB).conn'):
            return 'waiting for the store connection'
        if has(stack, 'sync.(*Mutex)') or has(stack, 'sync.(*RWMutex)'):
            return 'mutex'
        return 'blocked: ' + (reason or 'wait')
    return state.lower()


def q(v, p):
    s = sorted(v)
    return s[min(len(s) - 1, int(p * len(s)))]


def main():
    skip = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    events = read_events(sys.stdin)
    wins, t0 = [], None
    for e in events:
        if e[KIND] != 'Log':
            continue
        p = e[MSGF].split()
        if p and p[0] == 't0':
            t0 = e[T]
        elif p and p[0] == 'goal' and t0 is not None and len(p) == 3:
            wins.append((t0, t0 + int(p[2])))
            t0 = None
    wins = wins[skip:]
    if not wins:
        sys.exit('bench-trace: no samples marked in the trace (run BenchmarkROS_ApprovedCommandLatency with -test.trace)')

    # Each goroutine's states as intervals: (start, end, goid, state, stack, reason).
    bygo = defaultdict(list)
    for e in events:
        if e[KIND] == 'ST':
            bygo[e[GOID]].append(e)
    gi = {}
    allivs = []
    for g, evs in bygo.items():
        ivs = [(a[T], b[T], g, a[TO], a[TSTACK], a[REASON]) for a, b in zip(evs, evs[1:])]
        gi[g] = (ivs, [iv[0] for iv in ivs])
        allivs.extend(ivs)
    allivs.sort()
    starts = [iv[0] for iv in allivs]
    creates = [e for e in events if e[KIND] == 'ST' and e[FROM] == 'NotExist']
    ctimes = [e[T] for e in creates]
    unblocks = [e for e in events if e[KIND] == 'ST' and e[FROM] == 'Waiting' and e[TO] == 'Runnable']
    utimes = [e[T] for e in unblocks]

    def ivs_in(lo, hi, goid=None):
        if goid is not None:
            ivs, st_ = gi.get(goid, ([], []))
            i = max(0, bisect.bisect_right(st_, lo) - 1)
            return [iv for iv in ivs[i:] if iv[0] < hi and iv[1] > lo]
        i = bisect.bisect_left(starts, lo - 50_000_000)  # syscalls and runs are shorter
        out = []
        for iv in allivs[i:]:
            if iv[0] >= hi:
                break
            if iv[1] > lo:
                out.append(iv)
        return out

    seg, detail, fs = defaultdict(list), defaultdict(list), defaultdict(list)
    skipped = 0
    for lo, hi in wins:
        hg = next((iv[2] for iv in ivs_in(lo, hi) if has(iv[4], 'toolapi.(*Server).handleCall')), None)
        rg = rc = None
        for e in creates[bisect.bisect_left(ctimes, lo):]:
            if e[T] >= hi:
                break
            if has(e[TSTACK], 'actions.(*Runner).run'):
                rg, rc = e[GOID], e[T]
                break
        if hg is None or rg is None:
            skipped += 1
            continue
        hstart = next((iv[0] for iv in ivs_in(lo, hi, hg) if iv[3] in ('Runnable', 'Running') and iv[0] >= lo), lo)
        pub = next((iv[0] for iv in ivs_in(rc, hi, rg)
                    if has(iv[4], 'goroslib/v2.(*Publisher).Write') or has(iv[4], 'rosaction.(*Client')), None)
        if pub is None:
            for e in unblocks[bisect.bisect_left(utimes, rc):]:
                if e[T] >= hi:
                    break
                if e[G] == rg and has(e[STACK], 'Publisher).Write'):
                    pub = e[T]
                    break
        if pub is None:
            skipped += 1
            continue
        seg['total'].append(hi - lo)
        seg['1 client → handler runnable'].append(hstart - lo)
        seg['2 handler → run goroutine created'].append(rc - hstart)
        seg['3 run goroutine created → goal published'].append(pub - rc)
        seg['4 publish → subscriber callback'].append(hi - pub)
        for name, g, a, b in (('2', hg, hstart, rc), ('3', rg, rc, pub)):
            acc = defaultdict(int)
            for iv in ivs_in(a, b, g):
                acc[classify(iv[3], iv[4], iv[5])] += max(0, min(iv[1], b) - max(iv[0], a))
            for k, v in acc.items():
                detail[(name, k)].append(v)
        n = defaultdict(int)
        for iv in ivs_in(lo, pub):
            if iv[3] == 'Syscall' and has(iv[4], 'Xfsync'):
                who = ('transition' if has(iv[4], 'RecordTransition') else 'batch' if has(iv[4], 'writeBatch')
                       else 'idempotency' if any(has(iv[4], 'Store).' + f) for f in ('Reserve', 'Complete', 'Release'))
                       else 'other')
                n[who] += 1
                fs[who].append(iv[1] - iv[0])
        for k in ('transition', 'batch', 'idempotency', 'other'):
            fs['count ' + k].append(n[k])

    N = len(seg['total'])
    print('samples %d (skipped %d without a handler, run goroutine or publish found)' % (N, skipped))
    print('%-58s %8s %8s %8s' % ('segment (ms)', 'p50', 'mean', 'p90'))
    for k in sorted(seg):
        v = seg[k]
        print('%-58s %8.3f %8.3f %8.3f' % (k, q(v, .5) / 1e6, st.mean(v) / 1e6, q(v, .9) / 1e6))
    print()
    print('%-58s %8s %8s %8s' % ('state within segments 2 and 3 (ms per sample)', 'p50', 'mean', 'p90'))
    for k in sorted(detail):
        v = detail[k] + [0] * (N - len(detail[k]))
        print('%-58s %8.3f %8.3f %8.3f' % (k[0] + ' ' + k[1], q(v, .5) / 1e6, st.mean(v) / 1e6, q(v, .9) / 1e6))
    print()
    for k in sorted(fs):
        v = fs[k]
        if k.startswith('count'):
            print('fsyncs before the goal, %-12s mean %.2f per sample (0: %d, 1: %d, 2: %d, 3+: %d samples)' % (
                k[6:], st.mean(v), v.count(0), v.count(1), v.count(2), sum(1 for x in v if x >= 3)))
        else:
            print('fsync of %-12s n=%d  p50 %.3f ms  mean %.3f  p90 %.3f' % (
                k, len(v), q(v, .5) / 1e6, st.mean(v) / 1e6, q(v, .9) / 1e6))


if __name__ == '__main__':
    main()
