//! The region's guard and site are hygienic: the body's own names of the same spelling, `?`
//! and `return` leave the region as usual, and the value is the body's.

fn lookup(v: &[u32], i: usize) -> Option<u32> {
    let parprof_region = 10;
    let x = parprof_rt::parallel_region!("lookup", {
        #[allow(non_upper_case_globals)]
        static PARPROF_REGION: u32 = 1;
        *v.get(i)? + parprof_region + PARPROF_REGION
    });
    Some(x)
}

fn early(flag: bool) -> u32 {
    parprof_rt::parallel_region!({
        if flag {
            return 1;
        }
        2
    })
}

fn main() {
    assert_eq!(lookup(&[5], 0), Some(16));
    assert_eq!(lookup(&[5], 3), None);
    assert_eq!((early(true), early(false)), (1, 2));
    assert_eq!(parprof_rt::region::current_region(), 0);
}
