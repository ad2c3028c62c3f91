"""Rabenseifner's AllReduce: recursive-halving ReduceScatter, then recursive-doubling AllGather."""

from __future__ import annotations

from ._builder import Builder


def allreduce(b: Builder) -> tuple[int, int]:
    """Halving-doubling AllReduce on each channel's rank order.

    With p = 2^floor(log2 n) and r = n - p, positions 2i < 2r first send their whole buffer to 2i + 1
    (fold, reduce), the p survivors run the exchange, and 2i + 1 finally sends the result back (unfold,
    copy). The buffer has p blocks. Halving step k (partner at distance p / 2^(k+1)) sends the half of
    the current block range the partner keeps; doubling step k (distance 2^k) sends the whole range.
    Dependency rule: a survivor's send at step k of chunk c waits for its step k - 1 receive of chunk c
    (or its reduction task), for its own step k - 1 send of chunk c (so all its earlier receives
    precede: its program order), and for its step k send of chunk c - 1.
    """
    n = b.n
    m = n.bit_length() - 1
    p = 1 << m
    r = n - p
    part = b.size / (p * b.channels * b.chunks)
    everything = tuple(range(p))
    survivors = [2 * i + 1 for i in range(r)] + list(range(2 * r, n))
    for k in range(b.channels):
        pos = b.order(k)
        for c in range(b.chunks):
            ready: list[str | None] = [None] * p  # survivor -> ready id of its last receive of chunk c
            sent: list[str | None] = [None] * p  # survivor -> its last send of chunk c
            for i in range(r):
                _, ready[i] = b.send(
                    k,
                    c,
                    f"fold{i}",
                    pos[2 * i],
                    pos[2 * i + 1],
                    part * p,
                    (),
                    blocks=everything,
                    step=0,
                    op="reduce",
                )
            lo, hi = [0] * p, [p] * p  # block range each survivor holds
            exchanges = [(p >> (s + 1), "reduce") for s in range(m)] + [(1 << s, "copy") for s in range(m)]
            for s, (d, op) in enumerate(exchanges):
                received: list[str | None] = [None] * p
                new_lo, new_hi = lo[:], hi[:]
                for j in range(p):
                    q = j ^ d
                    if op == "reduce":  # keep the half on our side of bit d, send the other half
                        mid = (lo[j] + hi[j]) // 2
                        keep, give = (
                            ((lo[j], mid), (mid, hi[j])) if j & d == 0 else ((mid, hi[j]), (lo[j], mid))
                        )
                        new_lo[j], new_hi[j] = keep
                    else:  # send what we hold; we then hold ours and the partner's range
                        give = (lo[j], hi[j])
                        new_lo[j], new_hi[j] = min(lo[j], lo[q]), max(hi[j], hi[q])
                    sent[j], received[q] = b.send(
                        k,
                        c,
                        f"x{s}/{j}",
                        pos[survivors[j]],
                        pos[survivors[q]],
                        part * (give[1] - give[0]),
                        (ready[j], sent[j]),
                        blocks=tuple(range(*give)),
                        step=s + (1 if r else 0),
                        op=op,
                    )
                ready, lo, hi = received, new_lo, new_hi
            for i in range(r):
                b.send(
                    k,
                    c,
                    f"unfold{i}",
                    pos[2 * i + 1],
                    pos[2 * i],
                    part * p,
                    (ready[i], sent[i]),
                    blocks=everything,
                    step=2 * m + 1,
                    op="copy",
                )
    return p, 2 * m + (2 if r else 0)
