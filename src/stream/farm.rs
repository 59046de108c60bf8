//! A farm: `w` worker threads on one stage, and a collector that restores input order.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::thread::Scope;

use crossbeam_channel::{bounded, Receiver, Sender};

use super::pipeline::Link;
use super::{Ctx, Msg, Worker};
use crate::Result;

/// `workers` threads calling `f`, fed from one shared channel.
///
/// Order: the collector emits items by sequence number, holding early ones back. Memory: a
/// worker takes a ticket before it takes an item and the collector returns the ticket when
/// the item leaves the farm, so at most `workers + capacity` items are inside the farm,
/// however slow one item is. This cannot deadlock: items arrive in sequence order, so while
/// the next item due is still upstream, every item taken before it has left and returned its
/// ticket.
pub(super) struct FarmLink<'a, T, F> {
    pub(super) prev: Box<dyn Link<'a, T>>,
    pub(super) f: F,
    pub(super) workers: usize,
    pub(super) stage: usize,
}

impl<'a, T, U, F> Link<'a, U> for FarmLink<'a, T, F>
where
    T: Send + 'a,
    U: Send + 'a,
    F: Fn(T) -> Result<U> + Send + Sync + 'a,
{
    fn spawn<'s>(
        self: Box<Self>,
        scope: &'s Scope<'s, 'a>,
        ctx: &Arc<Ctx>,
        capacity: usize,
    ) -> Receiver<Msg<U>> {
        let FarmLink {
            prev,
            f,
            workers,
            stage,
        } = *self;
        let input = prev.spawn(scope, ctx, capacity);
        let window = workers + capacity;
        let (tickets, ticket_box) = bounded(window);
        for _ in 0..window {
            // Cannot fail: the receiver is alive and the channel holds `window`.
            let _ = tickets.send(());
        }
        // Never full: at most `window` items are in the farm.
        let (done_tx, done_rx) = bounded(window);
        let (tx, rx) = bounded(capacity);
        let f = Arc::new(f);
        for w in 0..workers {
            let (input, ticket_box, done_tx) = (input.clone(), ticket_box.clone(), done_tx.clone());
            let (f, shared) = (Arc::clone(&f), Arc::clone(ctx));
            ctx.spawn(scope, format!("stage-{stage}-worker-{w}"), move || {
                let mut worker = Worker::new(&shared, stage);
                while ticket_box.recv().is_ok() {
                    let Ok(msg) = input.recv() else { break };
                    if done_tx.send(worker.process(msg, &*f)).is_err() {
                        break;
                    }
                }
            });
        }
        let what = format!("stage-{stage}-order");
        ctx.spawn(scope, what, move || collect_in_order(done_rx, tx, tickets));
        rx
    }
}

/// Sends the workers' outputs on in sequence order, returning a ticket for each.
fn collect_in_order<T>(done: Receiver<Msg<T>>, tx: Sender<Msg<T>>, tickets: Sender<()>) {
    let mut next = 0;
    let mut early = BinaryHeap::new();
    for msg in done {
        early.push(Early(msg));
        while early.peek().is_some_and(|e| e.0.seq == next) {
            let Some(Early(msg)) = early.pop() else { break };
            if tx.send(msg).is_err() {
                return; // the consumer is gone; dropping `tickets` stops the workers
            }
            let _ = tickets.send(());
            next += 1;
        }
    }
}

/// A finished item waiting for those before it; the heap's top is the lowest sequence.
struct Early<T>(Msg<T>);

impl<T> PartialEq for Early<T> {
    fn eq(&self, other: &Self) -> bool {
        self.0.seq == other.0.seq
    }
}

impl<T> Eq for Early<T> {}

impl<T> PartialOrd for Early<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Early<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.seq.cmp(&self.0.seq)
    }
}
