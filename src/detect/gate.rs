//! The gate: derives the few short anchors that every opener literal contains, and orders them
//! for the SIMD searcher that runs them over whole buffers.

/// Everyday lines of training jobs that must never pass the gate: a gate anchor that occurs in
/// one of these would send a large share of ordinary lines to inspection. The anchors are chosen
/// so that none of them occurs here (unless a literal leaves no other choice), and a test keeps
/// every line here outside the gate.
pub const ORDINARY_LINES: &[&str] = &[
    "Epoch 3:  45%|#####     | 450/1000 [01:23<01:42,  5.36it/s, loss=0.4211, v_num=0]",
    "step 412 loss 1.2345 lr 3.0e-04 grad_norm 0.512 tokens/s 123456",
    "[2026-12-02 10:00:01,123][INFO][trainer.py:412] saving checkpoint to /ckpt/step_412.pt",
    "{'loss': 0.4211, 'grad_norm': 0.512, 'learning_rate': 2.9e-05, 'epoch': 3.45}",
    "[rank3]:[W1202 10:00:01.123456 ProcessGroupNCCL.cpp:1234] Warning: using default stream",
    "cuda available: True, device count: 8, using device cuda:3",
    "node01:1234:1234 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>",
    "node01:1234:1234 [0] NCCL INFO Channel 00/32 :    0   1   2   3   4   5   6   7",
    "INFO 12-02 10:00:01 metrics.py:351] Avg prompt throughput: 0.0 tokens/s, Running: 1 reqs",
    "2026-12-02 10:00:01.123456: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1635] \
     Created device /job:localhost/replica:0/task:0/device:GPU:0 with 78000 MB memory",
    "Downloading data files for split train: 100%|##########| 4/4 [00:05<00:00,  1.31s/it]",
    "Some weights of the model checkpoint at bert-base-uncased were not used when initializing \
     BertModel: this is expected if you are initializing it from a model trained on another task",
    "Waiting for the other ranks to reach the barrier; this can take a while on the first step",
    "1875/1875 [==============================] - 5s 3ms/step - loss: 0.2983 - accuracy: 0.9134",
    "| epoch 001:    100 / 1000 loss=2.301, nll_loss=1.2, ppl=2.3, wps=12345, ups=3.1, lr=0.0005",
    "[2026-12-02 10:00:01] iteration      100/  500000 | consumed samples: 25600 | \
     elapsed time per iteration (ms): 812.3 | learning rate: 1.5E-04 | lm loss: 7.4E+00 | \
     loss scale: 65536.0 | grad norm: 1.234 | number of skipped iterations:   0 |",
];

/// Least [`quality`] of an anchor.
const QUALITY_MIN: usize = 3;
/// Quality above this earns no more weight against coverage.
const QUALITY_CAP: usize = 10;
/// Shortest gate anchor. The SIMD searcher fingerprints every anchor on as many leading bytes as
/// the shortest one has (at most four): one 3-byte anchor makes every candidate check weaker, and
/// on the benchmark log a gate of ~45 four-byte anchors runs faster than one of ~35 with a few
/// three-byte ones.
pub(crate) const ANCHOR_MIN: usize = 4;
/// Longest anchor considered.
const ANCHOR_MAX: usize = 8;

/// How unlikely `c` is in ordinary text: letters and spaces are everywhere in logs, other bytes
/// (capitals, digits, punctuation) much less so, and longer strings are rarer.
fn quality(c: &str) -> usize {
    let rare = c
        .bytes()
        .filter(|b| !(b.is_ascii_lowercase() || *b == b' '))
        .count();
    let q = 2 * rare + c.len();
    // The SIMD searcher finds candidates by an anchor's first ANCHOR_MIN bytes and only then
    // compares the rest: an anchor that starts like ordinary text ("ning" of "Warning") costs a
    // comparison in many ordinary lines, however rare its tail.
    if in_ordinary_lines(c.get(..c.len().min(ANCHOR_MIN)).unwrap_or(c)) {
        q.saturating_sub(FINGERPRINT_PENALTY)
    } else {
        q
    }
}

/// Does `c` occur in an [`ORDINARY_LINES`] line? Every substring of up to [`ANCHOR_MAX`] bytes of
/// those lines is kept in a set, so that deriving the gate at start-up (tens of thousands of
/// candidate checks) stays a few milliseconds.
fn in_ordinary_lines(c: &str) -> bool {
    static SUBSTRINGS: std::sync::OnceLock<std::collections::HashSet<&'static str>> =
        std::sync::OnceLock::new();
    if c.len() > ANCHOR_MAX {
        return ORDINARY_LINES.iter().any(|o| o.contains(c));
    }
    SUBSTRINGS
        .get_or_init(|| {
            ORDINARY_LINES
                .iter()
                .flat_map(|o| {
                    (0..o.len())
                        .flat_map(move |i| (1..=ANCHOR_MAX).filter_map(move |n| o.get(i..i + n)))
                })
                .collect()
        })
        .contains(c)
}

/// Quality lost by an anchor whose first bytes occur in an [`ORDINARY_LINES`] line.
const FINGERPRINT_PENALTY: usize = 6;

/// Derives the gate's anchors from the opener literals: few short substrings such that every
/// literal contains one, none of which occurs in an [`ORDINARY_LINES`] line (unless a literal
/// leaves no other choice), preferring substrings shared by many literals and made of rarer
/// bytes. A greedy weighted set cover: few anchors keep the gate in the fast packed SIMD searcher
/// with few false candidates, and since a gate hit that no detail literal confirms costs one
/// line's inspection and nothing more, an anchor may be short.
///
/// A literal that a hard wrap cuts in two passes the gate on the side that keeps its anchor; the
/// scanner then joins the pieces (see `sources::stream`).
pub fn derive_gate(openers: &[String]) -> Vec<String> {
    // The literals ("slots") that must each contain an anchor.
    let mut slots: Vec<&str> = openers.iter().map(String::as_str).collect();
    slots.sort_unstable();
    slots.dedup();
    // A literal that contains another one is covered by whatever covers the shorter: only the
    // shortest of such chains need anchors, and the longer ones must not sway the cover.
    let all = slots.clone();
    slots.retain(|s| !all.iter().any(|t| t != s && s.contains(t)));
    // Candidate anchors: every substring of ANCHOR_MIN..=ANCHOR_MAX bytes of every slot (the
    // slot itself when shorter), not found in ordinary lines when the slot allows it.
    let mut cands: Vec<&str> = Vec::new();
    for s in &slots {
        let mut own: Vec<&str> = Vec::new();
        if s.len() <= ANCHOR_MIN {
            own.push(s);
        } else {
            for i in 0..s.len() {
                for n in ANCHOR_MIN..=ANCHOR_MAX {
                    if let Some(c) = s.get(i..i + n) {
                        own.push(c);
                    }
                }
            }
        }
        let clean: Vec<&str> = own
            .iter()
            .copied()
            .filter(|c| !in_ordinary_lines(c))
            .collect();
        cands.extend(if clean.is_empty() { vec![*s] } else { clean });
    }
    cands.sort_unstable();
    cands.dedup();
    // Which slots contain each substring of ANCHOR_MIN..=ANCHOR_MAX bytes, indexed once; other
    // candidates (a short or uncovered slot standing for itself) are looked up slot by slot.
    let mut index: std::collections::HashMap<&str, Vec<usize>> = std::collections::HashMap::new();
    for (i, s) in slots.iter().enumerate() {
        for start in 0..s.len() {
            for n in ANCHOR_MIN..=ANCHOR_MAX {
                if let Some(c) = s.get(start..start + n) {
                    let v = index.entry(c).or_default();
                    if v.last() != Some(&i) {
                        v.push(i);
                    }
                }
            }
        }
    }
    let covers = |c: &str| -> Vec<usize> {
        if (ANCHOR_MIN..=ANCHOR_MAX).contains(&c.len()) {
            index.get(c).cloned().unwrap_or_default()
        } else {
            (0..slots.len()).filter(|&i| slots[i].contains(c)).collect()
        }
    };
    let mut covered = vec![false; slots.len()];
    let mut chosen: Vec<String> = Vec::new();
    // Greedy: the candidate that covers the most uncovered literals, weighted by how rare it is
    // (capped, so that a long unique string does not beat a short shared one).
    // Each candidate's quality, once; unacceptable ones out before their cover is looked up.
    let scored: Vec<(&str, Vec<usize>, usize)> = cands
        .iter()
        .map(|c| (*c, quality(c)))
        .filter(|(_, q)| *q >= QUALITY_MIN)
        .map(|(c, q)| (c, covers(c), q))
        .collect();
    loop {
        let best = scored
            .iter()
            .map(|(c, cov, q)| (cov.iter().filter(|&&i| !covered[i]).count(), c, cov, *q))
            .filter(|(gain, ..)| *gain > 0)
            .max_by(|a, b| {
                let key =
                    |x: &(usize, &&str, &Vec<usize>, usize)| (x.0 * x.3.min(QUALITY_CAP), x.3);
                key(a).cmp(&key(b)).then_with(|| b.1.cmp(a.1))
            });
        let Some((_, c, cov, _)) = best else { break };
        for &i in cov.iter() {
            covered[i] = true;
        }
        chosen.push((*c).to_owned());
    }
    // A literal no acceptable candidate covers is its own anchor.
    for (i, s) in slots.iter().enumerate() {
        if !covered[i] {
            chosen.push((*s).to_owned());
        }
    }
    // An anchor that contains another one adds nothing.
    let all = chosen.clone();
    chosen.retain(|a| !all.iter().any(|b| b != a && a.contains(b.as_str())));
    merge_pairs(&slots, &covers, &mut chosen);
    chosen.sort();
    order_for_teddy(chosen)
}

/// Least [`quality`] of an anchor that replaces two.
const MERGE_QUALITY_MIN: usize = 6;

/// Greedy choice can spend two anchors where one would do: it takes `Invalid` for the many
/// literals that start with it, then `invalid ` for the rest, where `nvalid` covers both. Each
/// pair of anchors whose literals (those no third anchor covers) share one acceptable substring
/// is replaced by the best such substring, until no pair merges. Fewer anchors keep the gate in
/// the packed SIMD searcher's small-bucket regime.
/// `cover` gives the literals (indices into `slots`) that contain an anchor.
fn merge_pairs(slots: &[&str], cover: &dyn Fn(&str) -> Vec<usize>, chosen: &mut Vec<String>) {
    loop {
        let covers: Vec<Vec<usize>> = chosen.iter().map(|a| cover(a)).collect();
        // How many anchors cover each literal: one that `i` or `j` covers is theirs alone when
        // no other anchor adds to its count.
        let mut count = vec![0usize; slots.len()];
        for &s in covers.iter().flatten() {
            count[s] += 1;
        }
        let mut best: Option<(usize, usize, String, usize)> = None;
        for i in 0..chosen.len() {
            for j in i + 1..chosen.len() {
                // The literals that only `i` or `j` covers.
                let only: Vec<usize> = covers[i]
                    .iter()
                    .chain(&covers[j])
                    .copied()
                    .filter(|s| {
                        let own =
                            usize::from(covers[i].contains(s)) + usize::from(covers[j].contains(s));
                        count[*s] == own
                    })
                    .collect();
                let Some(&first) = only.iter().min_by_key(|&&s| slots[s].len()) else {
                    continue;
                };
                let base = slots[first];
                for start in 0..base.len() {
                    for n in ANCHOR_MIN..=ANCHOR_MAX {
                        let Some(c) = base.get(start..start + n) else {
                            continue;
                        };
                        // Most substrings of one literal are missing from the others: that
                        // test first, before the quality lookups.
                        if !only.iter().all(|&s| slots[s].contains(c)) {
                            continue;
                        }
                        let q = quality(c);
                        if q < MERGE_QUALITY_MIN
                            || best.as_ref().is_some_and(|b| b.3 >= q)
                            || in_ordinary_lines(c)
                        {
                            continue;
                        }
                        best = Some((i, j, c.to_owned(), q));
                    }
                }
            }
        }
        let Some((i, j, c, _)) = best else { return };
        chosen.remove(j);
        chosen.remove(i);
        if !chosen.contains(&c) {
            chosen.push(c);
        }
    }
}

/// The SIMD searcher's bucket count for `n` patterns: Teddy packs them into 16 buckets ("fat",
/// with AVX2) past 32 patterns, else 8.
fn teddy_buckets(n: usize) -> usize {
    if n > 32 {
        16
    } else {
        8
    }
}

/// The bucket the searcher gives the anchor at position `i` of `nb` buckets (unless it joins an
/// earlier anchor's, see [`teddy_assignment`]).
fn bucket_of_position(i: usize, nb: usize) -> usize {
    nb - 1 - i % nb
}

/// The 4-byte windows of the ordinary lines with how often each occurs, the model of everyday text
/// the ordering is tuned on. Numbers vary from line to line, so every line also counts with each
/// of its digits shifted by 1..=9.
fn ordinary_windows() -> Vec<([u8; ANCHOR_MIN], u32)> {
    let mut counts: std::collections::HashMap<[u8; ANCHOR_MIN], u32> =
        std::collections::HashMap::new();
    for line in ORDINARY_LINES {
        for k in 0..10u8 {
            let v: Vec<u8> = line
                .bytes()
                .chain([b'\n'])
                .map(|b| {
                    if b.is_ascii_digit() {
                        b'0' + (b - b'0' + k) % 10
                    } else {
                        b
                    }
                })
                .collect();
            for w in v.windows(ANCHOR_MIN) {
                if let Ok(w) = <[u8; ANCHOR_MIN]>::try_from(w) {
                    *counts.entry(w).or_default() += 1;
                }
            }
        }
    }
    counts.into_iter().collect()
}

/// One Teddy bucket's fingerprint: per leading byte position, the low and the high nibbles its
/// anchors have there (bit n set for nibble n).
#[derive(Clone, Copy, Default)]
struct Fingerprint {
    lo: [u16; ANCHOR_MIN],
    hi: [u16; ANCHOR_MIN],
}

impl Fingerprint {
    fn of<'a>(anchors: impl Iterator<Item = &'a str>) -> Self {
        let mut f = Fingerprint::default();
        for a in anchors {
            for (j, b) in a.bytes().take(ANCHOR_MIN).enumerate() {
                f.lo[j] |= 1 << (b & 0xf);
                f.hi[j] |= 1 << (b >> 4);
            }
        }
        f
    }

    /// Does the searcher flag `w` as a candidate for this bucket? A byte passes a position when
    /// both its nibbles are among the bucket's there, whichever anchors they came from.
    fn passes(&self, w: &[u8; ANCHOR_MIN]) -> bool {
        w.iter()
            .enumerate()
            .all(|(j, b)| self.lo[j] & (1 << (b & 0xf)) != 0 && self.hi[j] & (1 << (b >> 4)) != 0)
    }
}

/// Modelled cost of one bucket: each candidate window is checked against every anchor in it.
fn bucket_cost<'a>(
    members: impl Iterator<Item = &'a str> + Clone,
    windows: &[([u8; ANCHOR_MIN], u32)],
) -> u64 {
    let n = members.clone().count() as u64;
    if n == 0 {
        return 0;
    }
    let f = Fingerprint::of(members);
    windows
        .iter()
        .filter(|(w, _)| f.passes(w))
        .map(|(_, c)| u64::from(*c))
        .sum::<u64>()
        * n
}

/// The leading low nibbles by which the searcher groups anchors (see [`teddy_assignment`]).
fn low_nibbles(a: &str) -> Vec<u8> {
    a.bytes().take(ANCHOR_MIN).map(|b| b & 0xf).collect()
}

/// Which bucket each anchor of `order` lands in, as the searcher assigns them (aho-corasick's
/// packed Teddy, 1.1: position `i` goes to bucket `B - 1 - i % B`, except that an anchor whose
/// leading low nibbles equal an earlier anchor's joins that anchor's bucket).
fn teddy_assignment(order: &[String]) -> Vec<Vec<&str>> {
    let nb = teddy_buckets(order.len());
    let mut buckets: Vec<Vec<&str>> = vec![Vec::new(); nb];
    let mut seen: Vec<(Vec<u8>, usize)> = Vec::new();
    for (i, a) in order.iter().enumerate() {
        let lonybs = low_nibbles(a);
        let b = match seen.iter().find(|(l, _)| *l == lonybs) {
            Some((_, b)) => *b,
            None => {
                let b = bucket_of_position(i, nb);
                seen.push((lonybs, b));
                b
            }
        };
        buckets[b].push(a.as_str());
    }
    buckets
}

/// Modelled cost of the gate `order` over the ordinary lines (see [`bucket_cost`]).
#[cfg(test)]
fn modelled_cost(order: &[String]) -> u64 {
    cost_over(order, &ordinary_windows())
}

fn cost_over(order: &[String], windows: &[([u8; ANCHOR_MIN], u32)]) -> u64 {
    teddy_assignment(order)
        .iter()
        .map(|m| bucket_cost(m.iter().copied(), windows))
        .sum()
}

/// Orders the anchors so that the searcher's buckets group anchors with similar leading bytes.
///
/// Teddy, the packed SIMD searcher, puts the patterns into 8 or 16 buckets by their position in
/// the list and flags a position of the text as a candidate for a bucket when each of the next
/// four bytes has both nibbles among those of the bucket's anchors at that offset — a bucket that
/// mixes `" nan"` with `"THCu"` accepts many byte combinations neither has. Candidates are then
/// verified one anchor at a time. The order thus decides the gate's speed without changing what it
/// matches (only a match's start is used): over the benchmark log, orders of the same 57 anchors
/// ran between 0.6 and 2.8 times the time of the best. Anchors that the searcher keeps together
/// anyway (same leading low nibbles: `" nan"`, `" NaN"`, `" NAN"`) form one unit; the units are
/// put greedily, costliest first, into the bucket whose modelled cost over the ordinary lines
/// grows least, improved by swaps, and written back as an order: one unit's first anchor per
/// position, the rest of each unit at the end, where they follow their first.
fn order_for_teddy(sorted: Vec<String>) -> Vec<String> {
    let n = sorted.len();
    let nb = teddy_buckets(n);
    // Units of anchors with the same leading low nibbles, in sorted order.
    let mut units: Vec<Vec<&str>> = Vec::new();
    for a in &sorted {
        match units
            .iter_mut()
            .find(|u| low_nibbles(u[0]) == low_nibbles(a))
        {
            Some(u) => u.push(a.as_str()),
            None => units.push(vec![a.as_str()]),
        }
    }
    let h = units.len();
    if h <= nb {
        return sorted;
    }
    // Only windows that some bucket could flag matter: those the union of all anchors' nibbles
    // passes (most ordinary text does not).
    let union = Fingerprint::of(sorted.iter().map(String::as_str));
    let windows: Vec<_> = ordinary_windows()
        .into_iter()
        .filter(|(w, _)| union.passes(w))
        .collect();
    // Units per bucket as positions 0..h give them.
    let mut cap = vec![0usize; nb];
    for i in 0..h {
        cap[bucket_of_position(i, nb)] += 1;
    }
    let cost_of =
        |us: &[usize]| bucket_cost(us.iter().flat_map(|&u| units[u].iter().copied()), &windows);
    let mut by_cost: Vec<usize> = (0..h).collect();
    by_cost.sort_by_key(|&u| std::cmp::Reverse(cost_of(&[u])));
    let mut buckets: Vec<Vec<usize>> = vec![Vec::new(); nb];
    let mut cost: Vec<u64> = vec![0; nb];
    for u in by_cost {
        let best = (0..nb)
            .filter(|&b| buckets[b].len() < cap[b])
            .map(|b| {
                let mut m = buckets[b].clone();
                m.push(u);
                (cost_of(&m).saturating_sub(cost[b]), b)
            })
            .min();
        let Some((_, b)) = best else { return sorted };
        buckets[b].push(u);
        cost[b] = cost_of(&buckets[b]);
    }
    // Swaps between buckets while one lowers the total (bounded: start-up time matters).
    for _ in 0..3 {
        let mut improved = false;
        for x in 0..nb {
            for y in 0..nb {
                // Only a costly bucket can gain; a swap with any other may help it.
                if x == y || cost[x] == 0 {
                    continue;
                }
                for i in 0..buckets[x].len() {
                    for j in 0..buckets[y].len() {
                        let mut bx = buckets[x].clone();
                        let mut by = buckets[y].clone();
                        std::mem::swap(&mut bx[i], &mut by[j]);
                        let (cx, cy) = (cost_of(&bx), cost_of(&by));
                        if cx + cy < cost[x] + cost[y] {
                            (buckets[x], buckets[y]) = (bx, by);
                            (cost[x], cost[y]) = (cx, cy);
                            improved = true;
                        }
                    }
                }
            }
        }
        if !improved {
            break;
        }
    }
    // Write the buckets back as positions: first anchors, then the rest of each unit.
    let mut next = vec![0usize; nb];
    let mut order: Vec<String> = Vec::with_capacity(n);
    let mut rest: Vec<String> = Vec::new();
    for i in 0..h {
        let b = bucket_of_position(i, nb);
        let Some(&u) = buckets[b].get(next[b]) else {
            return sorted;
        };
        next[b] += 1;
        order.push(units[u][0].to_owned());
        rest.extend(units[u][1..].iter().map(|a| (*a).to_owned()));
    }
    order.extend(rest);
    // The same anchors, or (a bug) the sorted list as it was.
    let mut check = order.clone();
    check.sort();
    if check == sorted && cost_over(&order, &windows) <= cost_over(&sorted, &windows) {
        order
    } else {
        sorted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::DetectorSet;

    #[test]
    fn a_literal_that_holds_another_adds_nothing_to_the_cover() {
        let base: Vec<String> = ["Connection reset by peer", "Watchdog caught", "Xid (PCI:"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let mut more = base.clone();
        more.push("RuntimeError: Connection reset by peer".to_owned());
        more.push("[rank0]: Watchdog caught collective operation timeout".to_owned());
        assert_eq!(derive_gate(&base), derive_gate(&more));
        for l in &more {
            assert!(
                derive_gate(&more).iter().any(|a| l.contains(a.as_str())),
                "{l}"
            );
        }
    }

    #[test]
    fn the_order_is_a_permutation_the_model_prefers() {
        let d = DetectorSet::builtin();
        let order = d.gate_literals().to_vec();
        let mut sorted = order.clone();
        sorted.sort();
        let mut check = order.clone();
        check.sort();
        assert_eq!(check, sorted);
        // The derived order flags fewer ordinary windows than the plain sorted one (on today's
        // rule table: none at all, against about a thousand).
        assert!(
            modelled_cost(&order) < modelled_cost(&sorted),
            "{} vs {}",
            modelled_cost(&order),
            modelled_cost(&sorted)
        );
    }

    #[test]
    fn anchors_with_the_same_low_nibbles_share_a_bucket() {
        // " nan" and " NaN" differ only in high nibbles: the searcher keeps them together.
        let order: Vec<String> = [
            " nan", "CUDA", "File", " NaN", "SXid", "THCu", "OOM ", "cing", "erro",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let b = teddy_assignment(&order);
        assert!(b.iter().any(|m| m.contains(&" nan") && m.contains(&" NaN")));
        assert_eq!(b.iter().map(Vec::len).sum::<usize>(), order.len());
    }

    #[test]
    fn a_bucket_mixing_nibbles_flags_text_neither_anchor_has() {
        let f = Fingerprint::of([" nan", "THCu"].into_iter());
        // ' ' and 'T' share no nibble, nor 'n'/'H': " Hau"-like mixes pass, plain words mostly not.
        assert!(f.passes(b" nan"));
        assert!(f.passes(b"THCu"));
        assert!(f.passes(b"Tnan"));
        assert!(!f.passes(b"loss"));
    }
}
