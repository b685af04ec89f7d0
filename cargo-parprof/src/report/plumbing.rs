//! Rayon's and the standard library's frames between two frames of the program, folded into
//! one: a `par_iter().map(f)` puts 15–25 frames of bridges, folders, joins and closures
//! between the function that called it and `f`, and a reviewer looks for the two ends.

use super::frame_names::{crate_of, display_name};

/// Crates whose frames are plumbing: the scheduler and the iterators that call user code.
const RAYON_CRATES: [&str; 5] = [
    "rayon",
    "rayon_core",
    "crossbeam_deque",
    "crossbeam_epoch",
    "crossbeam_utils",
];
const STD_CRATES: [&str; 3] = ["std", "core", "alloc"];
/// Methods of primitive types (`u64::wrapping_mul`, `<usize as PartialOrd>::lt`) are std's.
const PRIMITIVES: [&str; 17] = [
    "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize", "f32",
    "f64", "bool", "char", "str",
];

/// Which plumbing a frame is, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plumbing {
    Rayon,
    Std,
}

pub fn plumbing_of(frame: &str) -> Option<Plumbing> {
    let display = display_name(frame);
    let krate = crate_of(&display);
    if RAYON_CRATES.contains(&krate) {
        Some(Plumbing::Rayon)
    } else if STD_CRATES.contains(&krate)
        || PRIMITIVES.contains(&krate)
        || krate.starts_with(['&', '*', '('])
        // `[T]::sort`, not a label such as `[blocked]`.
        || (krate.starts_with('[') && krate.len() < display.len())
    {
        Some(Plumbing::Std)
    } else {
        None
    }
}

/// Whether a frame is the program's own (or another library's): not plumbing, not a label
/// (`[blocked]`, `[libc.so.6]`, `[unknown]`), not a raw address.
fn is_program_frame(frame: &str) -> bool {
    plumbing_of(frame).is_none() && !frame.starts_with('[') && !frame.starts_with("0x")
}

/// Each run of two or more plumbing frames followed by a frame of the program becomes one
/// frame, `[rayon: 14 frames]` (`[std: …]` when no rayon frame is in it). A run toward the
/// leaf (before `[blocked]`, libc or nothing) is kept: there the samples are, in rayon's
/// sleep or a lock.
pub fn fold_plumbing(frames: &[String]) -> Vec<String> {
    let kinds: Vec<Option<Plumbing>> = frames.iter().map(|f| plumbing_of(f)).collect();
    let mut out = Vec::with_capacity(frames.len());
    let mut i = 0;
    while i < frames.len() {
        let run = kinds[i..].iter().take_while(|k| k.is_some()).count();
        let before_program_frame = frames.get(i + run).is_some_and(|f| is_program_frame(f));
        if run >= 2 && before_program_frame {
            let rayon = kinds[i..i + run].contains(&Some(Plumbing::Rayon));
            let label = if rayon { "rayon" } else { "std" };
            out.push(format!("[{label}: {run} frames]"));
            i += run;
        } else {
            let keep = run.max(1);
            out.extend(frames[i..i + keep].iter().cloned());
            i += keep;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(frames: &[&str]) -> Vec<String> {
        frames.iter().map(|f| (*f).to_owned()).collect()
    }

    #[test]
    fn runs_between_program_frames_fold_and_the_leaf_run_stays() {
        let stack = names(&[
            "rayon worker 1 (pool 0)",
            "rayon_core::registry::WorkerThread::wait_until_cold",
            "rayon_core::job::StackJob::execute",
            "<rayon::iter::map::MapFolder<C,F> as rayon::iter::plumbing::Folder<T>>::consume",
            "core::iter::Iterator::fold_[i]",
            "demo::step::{{closure}}",
            "core::ptr::drop_in_place<u8>",
            "demo::kernel",
            "alloc::vec::Vec<T>::push",
            "core::ptr::write",
        ]);
        assert_eq!(
            fold_plumbing(&stack),
            names(&[
                "rayon worker 1 (pool 0)",
                "[rayon: 4 frames]",
                "demo::step::{{closure}}",
                "core::ptr::drop_in_place<u8>",
                "demo::kernel",
                "alloc::vec::Vec<T>::push",
                "core::ptr::write",
            ])
        );
        let std_only = names(&[
            "main",
            "std::rt::lang_start",
            "core::ops::FnOnce::call_once",
            "demo::main",
        ]);
        assert_eq!(
            fold_plumbing(&std_only),
            names(&["main", "[std: 2 frames]", "demo::main"])
        );
        let blocked = names(&[
            "demo::run",
            "std::sync::Mutex<T>::lock",
            "std::sys::futex_wait",
            "[blocked]",
        ]);
        assert_eq!(fold_plumbing(&blocked), blocked);
        assert!(fold_plumbing(&[]).is_empty());
        let std_method = "<usize as core::cmp::PartialOrd>::lt_[i]";
        assert_eq!(plumbing_of(std_method), Some(Plumbing::Std));
        assert_eq!(plumbing_of("<[T]>::sort"), Some(Plumbing::Std));
        assert_eq!(plumbing_of("[blocked]"), None);
    }
}
