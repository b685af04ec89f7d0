//! Instrumented `join` and `join_context`: each closure is a task of the current region.

use super::context::{How, Tag};
use rayon::FnContext;

/// [`rayon::join`] whose two closures are recorded as tasks of the current region: the first
/// runs inline on the calling worker, the second is pushed onto its deque and is either popped
/// back (local) or stolen. Outside a region, or when nothing is recorded, this is plain rayon.
#[inline]
pub fn join<A, B, RA, RB>(oper_a: A, oper_b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    // rayon::join is this very call to join_context.
    join_context(|_| oper_a(), |_| oper_b())
}

/// [`rayon::join_context`], recorded like [`join`].
#[inline]
pub fn join_context<A, B, RA, RB>(oper_a: A, oper_b: B) -> (RA, RB)
where
    A: FnOnce(FnContext) -> RA + Send,
    B: FnOnce(FnContext) -> RB + Send,
    RA: Send,
    RB: Send,
{
    let Some(first) = Tag::here(How::Inline) else {
        return rayon::join_context(oper_a, oper_b);
    };
    let second = Tag {
        how: How::Pushed,
        ..first
    };
    let result = rayon::join_context(
        move |ctx| {
            let _task = first.begin();
            oper_a(ctx)
        },
        move |ctx| {
            let _task = second.begin();
            oper_b(ctx)
        },
    );
    first.resume();
    result
}
