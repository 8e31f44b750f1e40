//! The single-thread runtimes of the `sharded` I/O model
//! ([`run_echo_sharded`](super::run_echo_sharded)): each on its own thread,
//! driven until the [`Shards`] value is dropped.

use std::io;
use std::thread::JoinHandle;

use tokio::runtime::{Builder, Handle};
use tokio::sync::oneshot;

/// Most shards one run may start (the `--io-threads` bound).
pub const MAX_SHARDS: usize = 64;

/// Single-thread tokio runtimes, each driven by its own thread.
#[derive(Debug)]
pub struct Shards {
    handles: Vec<Handle>,
    stops: Vec<oneshot::Sender<()>>,
    threads: Vec<JoinHandle<()>>,
}

impl Shards {
    /// Starts `n` shards (1..=[`MAX_SHARDS`]; more are refused), threads
    /// named `echo-shard-<i>`.
    ///
    /// # Errors
    /// `InvalidInput` for `n` out of range; a runtime or thread that cannot
    /// be created (the shards already started are stopped).
    pub fn start(n: usize) -> io::Result<Self> {
        if !(1..=MAX_SHARDS).contains(&n) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{n} shards: must be in 1..={MAX_SHARDS}"),
            ));
        }
        let mut shards = Self {
            handles: Vec::with_capacity(n),
            stops: Vec::with_capacity(n),
            threads: Vec::with_capacity(n),
        };
        for i in 0..n {
            let rt = Builder::new_current_thread().enable_all().build()?;
            let (stop, stopped) = oneshot::channel::<()>();
            shards.handles.push(rt.handle().clone());
            shards.stops.push(stop);
            let thread = std::thread::Builder::new()
                .name(format!("echo-shard-{i}"))
                .spawn(move || {
                    // Either a stop or a dropped sender ends the shard.
                    let _ = rt.block_on(stopped);
                })?;
            shards.threads.push(thread);
        }
        Ok(shards)
    }

    /// The shards' runtime handles, in order.
    pub fn handles(&self) -> &[Handle] {
        &self.handles
    }
}

impl Drop for Shards {
    fn drop(&mut self) {
        for stop in self.stops.drain(..) {
            // The shard is already gone if its receiver was dropped.
            let _ = stop.send(());
        }
        for thread in self.threads.drain(..) {
            // A panicking shard thread has already reported through its tasks.
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_run_tasks_on_their_own_threads_and_stop() {
        let shards = Shards::start(2).unwrap();
        let names: Vec<String> = shards
            .handles()
            .iter()
            .map(|h| {
                let (tx, rx) = std::sync::mpsc::channel();
                h.spawn(async move {
                    let name = std::thread::current().name().map(str::to_owned);
                    let _ = tx.send(name.unwrap_or_default());
                });
                rx.recv().unwrap()
            })
            .collect();
        assert_eq!(names, ["echo-shard-0", "echo-shard-1"]);
        drop(shards);
        assert!(Shards::start(0).is_err());
        assert!(Shards::start(MAX_SHARDS + 1).is_err());
    }
}
