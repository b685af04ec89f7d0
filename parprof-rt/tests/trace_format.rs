//! The trace reader on valid, cut, corrupted and random input: typed errors, never a panic.

use parprof_rt::trace::*;
use proptest::prelude::*;

fn header() -> Header {
    Header {
        pid: 42,
        clock: ClockKind::Tsc,
        ticks_per_ns: 2.5,
        start: ClockSync {
            ticks: 1000,
            monotonic_ns: 400,
            uncertainty_ticks: 30,
        },
        bare_read_ticks: 40,
        calibration: EventKind::ALL
            .iter()
            .map(|&kind| Calibration {
                kind,
                cost_ticks: 20.5,
                spread: 0.125,
                rounds: 41,
            })
            .collect(),
        program: "prog".into(),
    }
}

fn arb_event() -> impl Strategy<Value = Event> {
    (
        any::<u32>(),
        any::<u16>(),
        proptest::sample::select(EventKind::ALL.to_vec()),
        0u8..4,
    )
        .prop_map(|(id, aux, kind, flags)| Event {
            ts: 0,
            id,
            aux,
            kind: kind as u8,
            // A task's origin takes 0–3; entries, unrecorded calls and buffer stalls (a writer
            // woken) have one flag; a detail event pauses, resumes or tells a frame.
            flags: match kind {
                EventKind::Enter | EventKind::Unrecorded | EventKind::BufferStall => flags % 2,
                EventKind::Detail => flags % 3,
                _ => flags,
            },
        })
}

fn arb_chunk() -> impl Strategy<Value = Chunk> {
    prop_oneof![
        (any::<u32>(), "[a-z:_]{0,40}", "[a-z/.]{0,20}", any::<u32>()).prop_map(
            |(id, name, file, line)| {
                Chunk::Site(SiteRecord {
                    id,
                    kind: SiteKind::Probe,
                    name,
                    file,
                    line,
                    caller: String::new(),
                    entry: None,
                })
            }
        ),
        (any::<u32>(), any::<u16>(), any::<u32>(), "\\PC{0,16}").prop_map(
            |(tid, rayon_index, pool, name)| Chunk::Thread(ThreadRecord {
                tid,
                rayon_index,
                pool,
                name
            })
        ),
        (
            any::<u32>(),
            0..u64::MAX / 2,
            proptest::collection::vec((arb_event(), any::<u32>()), 0..50)
        )
            .prop_map(|(tid, start, events)| {
                let mut ts = start;
                let events = events
                    .into_iter()
                    .map(|(e, gap)| {
                        ts += u64::from(gap);
                        Event { ts, ..e }
                    })
                    .collect();
                Chunk::Events { tid, events }
            }),
        (any::<u32>(), any::<u64>()).prop_map(|(tid, count)| Chunk::Lost { tid, count }),
        arb_totals().prop_map(Chunk::LifecycleTotals),
    ]
}

fn arb_totals() -> impl Strategy<Value = LifecycleTotals> {
    let sum = || (any::<u64>(), any::<u64>()).prop_map(|(count, ticks)| GapSum { count, ticks });
    let buckets = || {
        proptest::collection::btree_map(0..DURATION_BUCKETS as u16, any::<u64>(), 0..20)
            .prop_map(|m| m.into_iter().collect::<Vec<_>>())
    };
    (
        (any::<u32>(), any::<u32>(), any::<[u64; 7]>()),
        (sum(), sum()),
        proptest::collection::btree_map(0u8..=64, sum(), 0..8),
        (buckets(), buckets(), any::<[u64; 3]>()),
    )
        .prop_map(
            |((tid, region, v), (local, steal), resume, (durations, gaps, idle))| LifecycleTotals {
                tid,
                region,
                user_code_ticks: v[0],
                bypasses: v[1],
                task_ends: v[2],
                tasks: [v[3], v[4], v[5], v[6]],
                local_gaps: local,
                steal_gaps: steal,
                resume_gaps: resume.into_iter().collect(),
                idle_ticks: idle[0],
                search_rounds: idle[1],
                idle_episodes: idle[2],
                task_durations: durations,
                local_gap_lengths: gaps,
                min_task_ticks: v[0] / 3,
                max_task_ticks: v[0] / 2,
                max_task_end: v[1],
                max_task_span_ticks: v[2],
                mark_spacing_ticks: v[3] / 7,
                iterators: v[4] / 5,
                iterator_items: v[4],
                nested_iterators: v[5] / 5,
                nested_iterator_items: v[5],
            },
        )
}

#[test]
fn an_end_point_far_off_the_start_up_rate_is_not_used() {
    let h = header();
    let near = ClockSync {
        ticks: h.start.ticks + 2_500_000,
        monotonic_ns: h.start.monotonic_ns + 1_000_010,
        uncertainty_ticks: 0,
    };
    let whole_run = TickConverter::new(&h, Some(&near)).ns_per_tick();
    assert!((whole_run - 1_000_010.0 / 2_500_000.0).abs() < 1e-12);
    let absurd = ClockSync {
        monotonic_ns: u64::MAX,
        ..near
    };
    assert_eq!(TickConverter::new(&h, Some(&absurd)).ns_per_tick(), 0.4);
}

#[test]
fn every_duration_bucket_holds_values_near_its_midpoint() {
    for v in (0..50_000u64).chain([u64::MAX, u64::MAX / 3, 1 << 40, (1 << 40) - 1]) {
        let bucket = duration_bucket(v);
        assert!(bucket < DURATION_BUCKETS, "{v}");
        let mid = duration_bucket_midpoint(bucket);
        assert!(
            mid.abs_diff(v) as f64 <= v as f64 / 16.0,
            "value {v} midpoint {mid}"
        );
    }
    assert!(duration_bucket(7) < duration_bucket(8) && duration_bucket(15) < duration_bucket(16));
}

fn encode(chunks: &[Chunk], end: bool) -> Vec<u8> {
    let mut enc = ChunkEncoder::new();
    enc.preamble();
    enc.chunk(&Chunk::Header(header()));
    for c in chunks {
        enc.chunk(c);
    }
    if end {
        enc.chunk(&Chunk::End(End::default()));
    }
    enc.into_bytes()
}

/// What a reader yielded: the chunks, how the trace ended, and the error that stopped it.
type ReadOutcome = (Vec<Chunk>, Option<Completeness>, Option<TraceError>);

/// Reads everything a reader yields; the error, if any, ends the list.
fn read_all(bytes: &[u8]) -> Result<ReadOutcome, TraceError> {
    let mut reader = TraceReader::new(bytes)?;
    let mut chunks = Vec::new();
    loop {
        match reader.next_chunk() {
            Ok(Some(c)) => chunks.push(c),
            Ok(None) => return Ok((chunks, reader.completeness().cloned(), None)),
            Err(e) => return Ok((chunks, None, Some(e))),
        }
    }
}

#[test]
fn round_trip_of_a_complete_trace() {
    let chunks = vec![
        Chunk::Site(SiteRecord {
            id: 1,
            kind: SiteKind::Region,
            name: "r".into(),
            file: "f.rs".into(),
            line: 3,
            caller: String::new(),
            entry: None,
        }),
        Chunk::Events {
            tid: 9,
            events: vec![Event {
                ts: 1,
                id: 1,
                aux: 2,
                kind: 5,
                flags: 2,
            }],
        },
    ];
    let bytes = encode(&chunks, true);
    let reader = TraceReader::new(&bytes[..]).unwrap();
    assert_eq!(reader.header(), &header());
    let (read, completeness, err) = read_all(&bytes).unwrap();
    assert!(err.is_none());
    assert_eq!(read[..2], chunks[..]);
    assert_eq!(completeness, Some(Completeness::Complete));
}

#[test]
fn typed_errors_for_foreign_future_and_empty_input() {
    assert!(matches!(TraceReader::new(&b""[..]), Err(TraceError::Empty)));
    assert!(matches!(
        TraceReader::new(&b"PPTR"[..]),
        Err(TraceError::Empty)
    ));
    assert!(matches!(
        TraceReader::new(&b"GIF89a-not-a-trace"[..]),
        Err(TraceError::NotATrace)
    ));
    let mut future = encode(&[], true);
    future[8..12].copy_from_slice(&(VERSION + 1).to_le_bytes());
    assert!(matches!(
        TraceReader::new(&future[..]),
        Err(TraceError::FutureVersion { found, supported }) if found == VERSION + 1 && supported == VERSION
    ));
}

#[test]
fn a_flipped_bit_is_a_checksum_error_at_the_chunk_offset() {
    let chunks = vec![
        Chunk::Lost { tid: 1, count: 5 },
        Chunk::Lost { tid: 2, count: 6 },
    ];
    let clean = encode(&chunks, true);
    let second_chunk_at = encode(&chunks[..1], false).len();
    let mut bytes = clean.clone();
    bytes[second_chunk_at + 10] ^= 0x10;
    let (read, _, err) = read_all(&bytes).unwrap();
    assert_eq!(read, vec![chunks[0].clone()]);
    match err {
        Some(TraceError::Corrupt { offset, .. }) => assert_eq!(offset, second_chunk_at as u64),
        other => panic!("expected a corrupt-chunk error, got {other:?}"),
    }
}

#[test]
fn unknown_flags_of_an_entry_unrecorded_calls_or_a_stall_are_corruption() {
    for kind in [
        EventKind::Enter,
        EventKind::Unrecorded,
        EventKind::BufferStall,
    ] {
        let chunks = [Chunk::Events {
            tid: 1,
            events: vec![Event {
                flags: 2,
                ..Event::new(1, kind, 1)
            }],
        }];
        let (read, _, err) = read_all(&encode(&chunks, true)).unwrap();
        assert!(read.is_empty(), "{kind:?}");
        assert!(
            matches!(err, Some(TraceError::Corrupt { .. })),
            "{kind:?}: {err:?}"
        );
    }
}

proptest! {
    #[test]
    fn every_cut_reads_up_to_the_last_complete_chunk(chunks in proptest::collection::vec(arb_chunk(), 0..12), cut in any::<prop::sample::Index>()) {
        let full = encode(&chunks, false);
        let header_len = encode(&[], false).len();
        let at = header_len + cut.index(full.len() - header_len + 1);
        let (read, completeness, err) = read_all(&full[..at]).unwrap();
        prop_assert!(err.is_none());
        let is_cut = matches!(completeness, Some(Completeness::Cut { .. }));
        prop_assert!(is_cut, "completeness {:?}", completeness);
        prop_assert!(read.len() <= chunks.len());
        prop_assert_eq!(&read[..], &chunks[..read.len()]);
        // Everything that fit entirely before the cut is there.
        let mut complete = 0;
        for n in 0..=chunks.len() {
            if encode(&chunks[..n], false).len() <= at { complete = n; }
        }
        prop_assert_eq!(read.len(), complete);
    }

    #[test]
    fn mutated_traces_never_panic(chunks in proptest::collection::vec(arb_chunk(), 0..8), flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        let mut bytes = encode(&chunks, true);
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= value | 1;
        }
        let _ = read_all(&bytes);
    }

    #[test]
    fn random_bytes_after_a_valid_preamble_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&VERSION.to_le_bytes());
        bytes.extend_from_slice(&tail);
        let _ = read_all(&bytes);
    }
}

/// A hot recursive probe's events (entries and exits a few hundred ticks apart, one site with
/// a second nested in it) pack into at most 6 bytes each, against 16 in memory.
#[test]
fn probe_events_pack_into_a_few_bytes() {
    let mut events = Vec::new();
    let mut ts = 1u64 << 40;
    for i in 0..100_000u64 {
        let id = 1 + (i % 7 == 0) as u32;
        for kind in [EventKind::Enter, EventKind::Exit] {
            ts += 40 + (i * 2654435761) % 3000;
            events.push(Event::new(ts, kind, id));
        }
    }
    let mut encoder = ChunkEncoder::new();
    encoder.events(1, &events, &[]);
    let bytes = encoder.into_bytes();
    let per_event = bytes.len() as f64 / events.len() as f64;
    assert!(per_event <= 6.0, "{per_event:.2} bytes per event");
    let (read, _, err) = read_all(&[encode(&[], false), bytes].concat()).unwrap();
    assert!(err.is_none());
    assert_eq!(read, vec![Chunk::Events { tid: 1, events }]);
}

#[test]
fn events_left_out_by_the_writer_leave_a_chunk_of_the_others() {
    // Two slices of a ring; the events of site 9 are left out, the chunk counts the rest.
    let event = |ts, kind, id| Event::new(ts, kind, id);
    let first = [
        event(10, EventKind::Enter, 1),
        event(20, EventKind::Enter, 9),
        event(30, EventKind::Exit, 9),
    ];
    let second = [event(40, EventKind::Exit, 1)];
    let mut encoder = ChunkEncoder::new();
    assert_eq!(encoder.events_kept(3, &first, &second, |e| e.id != 9), 2);
    // Nothing kept: no chunk at all.
    assert_eq!(encoder.events_kept(3, &first[1..], &[], |e| e.id != 9), 0);
    let (read, _, err) = read_all(&[encode(&[], false), encoder.into_bytes()].concat()).unwrap();
    assert!(err.is_none(), "{err:?}");
    assert_eq!(
        read,
        vec![Chunk::Events {
            tid: 3,
            events: vec![first[0], second[0]],
        }]
    );
}

#[test]
fn every_event_kind_is_read_back_from_its_number_and_no_other_number_is() {
    for v in 0..=u8::MAX {
        let expected = EventKind::ALL.iter().copied().find(|k| *k as u8 == v);
        assert_eq!(EventKind::from_u8(v), expected, "kind number {v}");
    }
}

#[test]
fn hook_costs_round_trip_and_absurd_costs_are_refused() {
    let costs = HookCosts {
        task_in_uc_ticks: 12.5,
        task_in_gap_ticks: 11.25,
        resume_in_uc_ticks: 6.0,
        tasks_timed: 24_576,
        spin_ns: 40,
    };
    let (read, _, err) = read_all(&encode(&[Chunk::HookCosts(costs)], true)).unwrap();
    assert!(err.is_none());
    assert_eq!(read[0], Chunk::HookCosts(costs));
    let nan = HookCosts {
        task_in_gap_ticks: f64::NAN,
        ..costs
    };
    let (read, _, err) = read_all(&encode(&[Chunk::HookCosts(nan)], true)).unwrap();
    assert!(read.is_empty() && err.is_some(), "{read:?}");
}
