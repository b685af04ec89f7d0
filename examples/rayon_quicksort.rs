//! A recursive quicksort with `rayon::join` in a plain function, the shape of user code whose
//! cpu flamegraph is hundreds of frames deep before recursion is folded. Prints the number of
//! threads rayon used and the checksum of the sorted data.

use parprof_rt::probe;

/// Sorts `v` in place: partitions around the last element, then sorts both halves in
/// parallel; small slices are sorted sequentially.
fn quicksort(v: &mut [u64]) {
    if v.len() <= 64 {
        insertion_sort(v);
        return;
    }
    let mid = parprof_suite::partition(v);
    let (low, high) = v.split_at_mut(mid);
    rayon::join(|| quicksort(low), || quicksort(&mut high[1..]));
}

#[inline(never)]
fn insertion_sort(v: &mut [u64]) {
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 && v[j - 1] > v[j] {
            v.swap(j - 1, j);
            j -= 1;
        }
    }
}

#[probe]
fn sort_rounds(rounds: u64, len: usize) -> u64 {
    let mut checksum = 0u64;
    for round in 0..rounds {
        // A xorshift sequence: deterministic and without long sorted runs.
        let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ round;
        let mut v: Vec<u64> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            })
            .collect();
        quicksort(&mut v);
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
        checksum = checksum.wrapping_add(v[len / 2]);
    }
    checksum
}

fn main() {
    let checksum = sort_rounds(6, 400_000);
    println!(
        "threads={} checksum={checksum}",
        rayon::current_num_threads()
    );
}
