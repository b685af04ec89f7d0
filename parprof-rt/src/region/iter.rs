//! Parallel iterators as tasks: an adapter at rayon's `iter::plumbing` seam.
//!
//! rayon runs a parallel iterator by splitting its producer and consumer in halves and handing
//! the halves to `join_context` until a piece is small enough, which is then folded
//! sequentially. Here a **job** is a half handed over at a split and a **task** is a leaf fold:
//! it begins where the leaf's folder or iterator is made (`into_folder`, `into_iter`,
//! `fold_with`) and ends when it completes (`complete`, the iterator dropped).
//!
//! Every half carries a [`Tag`] naming the worker that split it. The right half goes onto that
//! worker's deque: it is local if that worker runs it, stolen otherwise. The left half runs in
//! the job that was split, so it inherits the way that job was obtained; a leaf thus counts
//! once as local, stolen, injected or inline, however many times its job was split further.
//! A split made outside the pool (the first one, when the iterator is driven from a thread
//! outside it) hands both halves to rayon's injector: both are injected.

use super::context::{How, Tag, TaskGuard, worker_index};
use crate::trace::NO_WORKER;
use rayon::iter::plumbing::{Consumer, Folder, Producer, ProducerCallback, UnindexedConsumer};
use rayon::iter::{IndexedParallelIterator, ParallelIterator};
use std::cell::Cell;

/// A parallel iterator whose leaf folds are recorded as tasks of the region current where it
/// is driven. Made by [`instrument`] or [`ParallelIteratorExt::instrument`]; outside a region,
/// or when nothing is recorded, it drives the inner iterator unchanged.
#[derive(Clone, Debug)]
#[must_use = "iterator adaptors are lazy and do nothing unless consumed"]
pub struct Instrumented<I> {
    inner: I,
}

/// Wraps a parallel iterator so that its pieces are recorded as tasks (what
/// `parallel_region!` does to `x.par_iter()` and its kin).
pub fn instrument<I: ParallelIterator>(iter: I) -> Instrumented<I> {
    Instrumented { inner: iter }
}

/// `.instrument()` on every parallel iterator, for explicit use inside a region.
pub trait ParallelIteratorExt: ParallelIterator {
    fn instrument(self) -> Instrumented<Self> {
        instrument(self)
    }
}

impl<I: ParallelIterator> ParallelIteratorExt for I {}

impl<I: ParallelIterator> ParallelIterator for Instrumented<I> {
    type Item = I::Item;

    fn drive_unindexed<C>(self, consumer: C) -> C::Result
    where
        C: UnindexedConsumer<Self::Item>,
    {
        let Some(tag) = Tag::here(How::Inline) else {
            return self.inner.drive_unindexed(consumer);
        };
        let result = self.inner.drive_unindexed(TaskConsumer::new(consumer, tag));
        tag.resume();
        result
    }

    fn opt_len(&self) -> Option<usize> {
        self.inner.opt_len()
    }
}

impl<I: IndexedParallelIterator> IndexedParallelIterator for Instrumented<I> {
    fn len(&self) -> usize {
        self.inner.len()
    }

    fn drive<C: Consumer<Self::Item>>(self, consumer: C) -> C::Result {
        let Some(tag) = Tag::here(How::Inline) else {
            return self.inner.drive(consumer);
        };
        let result = self.inner.drive(TaskConsumer::new(consumer, tag));
        tag.resume();
        result
    }

    fn with_producer<CB: ProducerCallback<Self::Item>>(self, callback: CB) -> CB::Output {
        let Some(tag) = Tag::here(How::Inline) else {
            return self.inner.with_producer(callback);
        };
        let result = self.inner.with_producer(TaskCallback {
            inner: callback,
            tag,
        });
        tag.resume();
        result
    }
}

/// The tags of the two halves of a piece tagged `tag`, split on the calling thread.
fn split(tag: Tag) -> (Tag, Tag) {
    let me = worker_index();
    if me == NO_WORKER {
        // Split outside the pool: rayon injects both halves, so both keep "created outside".
        let outside = Tag {
            creator: NO_WORKER,
            ..tag
        };
        return (
            Tag {
                how: How::Inline,
                ..outside
            },
            Tag {
                how: How::Pushed,
                ..outside
            },
        );
    }
    let left = Tag {
        how: How::Acquired(tag.origin(me)),
        ..tag
    };
    let right = Tag {
        creator: me,
        how: How::Pushed,
        ..tag
    };
    (left, right)
}

/// A consumer whose leaf folders are tasks. The tag is in a `Cell` because an unindexed split
/// (`split_off_left(&self)`) turns `self` into the right half.
struct TaskConsumer<C> {
    inner: C,
    tag: Cell<Tag>,
}

impl<C> TaskConsumer<C> {
    fn new(inner: C, tag: Tag) -> Self {
        TaskConsumer {
            inner,
            tag: Cell::new(tag),
        }
    }
}

impl<T, C: Consumer<T>> Consumer<T> for TaskConsumer<C> {
    type Folder = TaskFolder<C::Folder>;
    type Reducer = C::Reducer;
    type Result = C::Result;

    fn split_at(self, index: usize) -> (Self, Self, Self::Reducer) {
        let (left_tag, right_tag) = split(self.tag.get());
        let (left, right, reducer) = self.inner.split_at(index);
        (
            TaskConsumer::new(left, left_tag),
            TaskConsumer::new(right, right_tag),
            reducer,
        )
    }

    fn into_folder(self) -> Self::Folder {
        let task = self.tag.get().begin();
        TaskFolder {
            inner: self.inner.into_folder(),
            task,
        }
    }

    fn full(&self) -> bool {
        self.inner.full()
    }
}

impl<T, C: UnindexedConsumer<T>> UnindexedConsumer<T> for TaskConsumer<C> {
    fn split_off_left(&self) -> Self {
        let (left_tag, right_tag) = split(self.tag.get());
        self.tag.set(right_tag);
        TaskConsumer::new(self.inner.split_off_left(), left_tag)
    }

    fn to_reducer(&self) -> Self::Reducer {
        self.inner.to_reducer()
    }
}

/// A leaf fold: the task lasts until `complete` (or until the folder is dropped on unwinding).
struct TaskFolder<F> {
    inner: F,
    task: TaskGuard,
}

impl<T, F: Folder<T>> Folder<T> for TaskFolder<F> {
    type Result = F::Result;

    fn consume(self, item: T) -> Self {
        TaskFolder {
            inner: self.inner.consume(item),
            task: self.task,
        }
    }

    fn consume_iter<It>(self, iter: It) -> Self
    where
        It: IntoIterator<Item = T>,
    {
        TaskFolder {
            inner: self.inner.consume_iter(iter),
            task: self.task,
        }
    }

    fn complete(self) -> Self::Result {
        let result = self.inner.complete();
        drop(self.task);
        result
    }

    fn full(&self) -> bool {
        self.inner.full()
    }
}

/// Hands the inner iterator's producer to the callback wrapped, for indexed adaptors that
/// drive producers themselves (`zip`, `chunks`, `enumerate`, ...).
struct TaskCallback<CB> {
    inner: CB,
    tag: Tag,
}

impl<T, CB: ProducerCallback<T>> ProducerCallback<T> for TaskCallback<CB> {
    type Output = CB::Output;

    fn callback<P: Producer<Item = T>>(self, producer: P) -> Self::Output {
        self.inner.callback(TaskProducer {
            inner: producer,
            tag: self.tag,
        })
    }
}

/// A producer whose leaves are tasks: from `into_iter` until the iterator is dropped, or for
/// the duration of `fold_with`.
struct TaskProducer<P> {
    inner: P,
    tag: Tag,
}

impl<P: Producer> Producer for TaskProducer<P> {
    type Item = P::Item;
    type IntoIter = TaskIter<P::IntoIter>;

    fn into_iter(self) -> Self::IntoIter {
        let task = self.tag.begin();
        TaskIter {
            inner: self.inner.into_iter(),
            task,
        }
    }

    fn min_len(&self) -> usize {
        self.inner.min_len()
    }

    fn max_len(&self) -> usize {
        self.inner.max_len()
    }

    fn split_at(self, index: usize) -> (Self, Self) {
        let (left_tag, right_tag) = split(self.tag);
        let (left, right) = self.inner.split_at(index);
        (
            TaskProducer {
                inner: left,
                tag: left_tag,
            },
            TaskProducer {
                inner: right,
                tag: right_tag,
            },
        )
    }

    fn fold_with<F: Folder<Self::Item>>(self, folder: F) -> F {
        let _task = self.tag.begin();
        self.inner.fold_with(folder)
    }
}

/// A leaf's sequential iterator; the task ends when it is dropped.
struct TaskIter<I> {
    inner: I,
    task: TaskGuard,
}

impl<I: Iterator> Iterator for TaskIter<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        self.inner.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }

    fn fold<B, G: FnMut(B, I::Item) -> B>(self, init: B, f: G) -> B {
        // The inner iterator's own fold is often faster than repeated `next`.
        let TaskIter { inner, task } = self;
        let result = inner.fold(init, f);
        drop(task);
        result
    }
}

impl<I: DoubleEndedIterator> DoubleEndedIterator for TaskIter<I> {
    fn next_back(&mut self) -> Option<I::Item> {
        self.inner.next_back()
    }
}

impl<I: ExactSizeIterator> ExactSizeIterator for TaskIter<I> {
    fn len(&self) -> usize {
        self.inner.len()
    }
}
