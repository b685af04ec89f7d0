//! Instrumented `scope` (with a wrapped scope type whose `spawn` records tasks) and `spawn`.

use super::context::{How, Tag};
use std::ops::Deref;

/// A [`rayon::Scope`] whose `spawn` records the spawned closures as tasks of the region
/// current where they are spawned. It dereferences to the rayon scope, so code that takes a
/// `&rayon::Scope` still accepts it (spawns made through that code are not recorded).
pub struct Scope<'a, 'scope> {
    inner: &'a rayon::Scope<'scope>,
}

impl<'a, 'scope> Scope<'a, 'scope> {
    /// [`rayon::Scope::spawn`]: the body is pushed onto the spawning worker's deque (injected
    /// from outside the pool) and recorded as a task when it runs.
    pub fn spawn<BODY>(&self, body: BODY)
    where
        BODY: FnOnce(&Scope<'_, 'scope>) + Send + 'scope,
    {
        match Tag::here(How::Pushed) {
            None => self.inner.spawn(move |s| body(&Scope { inner: s })),
            Some(tag) => self.inner.spawn(move |s| {
                let _task = tag.begin();
                body(&Scope { inner: s })
            }),
        }
    }

    /// The rayon scope this wraps.
    pub fn as_rayon(&self) -> &'a rayon::Scope<'scope> {
        self.inner
    }
}

impl<'scope> Deref for Scope<'_, 'scope> {
    type Target = rayon::Scope<'scope>;

    fn deref(&self) -> &Self::Target {
        self.inner
    }
}

/// [`rayon::scope`] whose body is a task of the current region (inline on a worker, injected
/// from outside the pool) and whose spawns are recorded (see [`Scope::spawn`]).
pub fn scope<'scope, OP, R>(op: OP) -> R
where
    OP: FnOnce(&Scope<'_, 'scope>) -> R + Send,
    R: Send,
{
    let Some(body) = Tag::here(How::Inline) else {
        return rayon::scope(|s| op(&Scope { inner: s }));
    };
    let result = rayon::scope(|s| {
        let _task = body.begin();
        op(&Scope { inner: s })
    });
    body.resume();
    result
}

/// [`rayon::spawn`]: the closure is recorded as a task of the current region when it runs
/// (local or stolen when spawned from a worker, injected from outside the pool). The region
/// may have ended by then; the task still counts in it.
pub fn spawn<F>(func: F)
where
    F: FnOnce() + Send + 'static,
{
    match Tag::here(How::Pushed) {
        None => rayon::spawn(func),
        Some(tag) => rayon::spawn(move || {
            let _task = tag.begin();
            func()
        }),
    }
}
