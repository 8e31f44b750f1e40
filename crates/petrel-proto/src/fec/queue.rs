//! A FIFO of datagrams bounded in count and bytes, with a buffer pool so that
//! steady-state traffic allocates nothing.

use std::collections::VecDeque;

/// Spare buffers kept for reuse.
const POOL_LIMIT: usize = 128;

#[derive(Debug)]
pub(crate) struct DatagramQueue {
    queue: VecDeque<Vec<u8>>,
    bytes: usize,
    max_len: usize,
    max_bytes: usize,
    dropped: u64,
    pool: Vec<Vec<u8>>,
}

impl DatagramQueue {
    /// A queue of at most `max_len` datagrams and `max_bytes` bytes.
    pub fn new(max_len: usize, max_bytes: usize) -> Self {
        DatagramQueue {
            queue: VecDeque::new(),
            bytes: 0,
            max_len,
            max_bytes,
            dropped: 0,
            pool: Vec::new(),
        }
    }

    /// An empty buffer, reused from the pool when one is spare.
    pub fn buffer(&mut self) -> Vec<u8> {
        let mut b = self.pool.pop().unwrap_or_default();
        b.clear();
        b
    }

    /// Returns a buffer to the pool (dropped when the pool is full).
    pub fn recycle(&mut self, buf: Vec<u8>) {
        if self.pool.len() < POOL_LIMIT {
            self.pool.push(buf);
        }
    }

    /// Appends `buf`, first dropping the oldest datagrams the bounds require.
    pub fn push(&mut self, buf: Vec<u8>) {
        while self.queue.len() >= self.max_len || self.bytes + buf.len() > self.max_bytes {
            let Some(old) = self.queue.pop_front() else {
                break;
            };
            self.bytes -= old.len();
            self.dropped += 1;
            self.recycle(old);
        }
        self.bytes += buf.len();
        self.queue.push_back(buf);
    }

    /// Moves the oldest datagram into `out` (its old buffer goes to the pool).
    pub fn pop_into(&mut self, out: &mut Vec<u8>) -> bool {
        match self.queue.pop_front() {
            Some(mut d) => {
                self.bytes -= d.len();
                std::mem::swap(out, &mut d);
                self.recycle(d);
                true
            }
            None => false,
        }
    }

    /// Whether no datagram is queued.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Datagrams queued.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Bytes queued.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Datagrams dropped by the bounds so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_oldest_beyond_count_and_bytes() {
        let mut q = DatagramQueue::new(2, 10);
        for i in 0..3u8 {
            q.push(vec![i; 4]);
        }
        assert_eq!((q.dropped(), q.bytes()), (1, 8));
        q.push(vec![9; 6]);
        assert_eq!((q.dropped(), q.bytes()), (2, 10));
        let mut out = Vec::new();
        assert!(q.pop_into(&mut out));
        assert_eq!(out, vec![2; 4]);
        assert!(q.pop_into(&mut out));
        assert!(!q.pop_into(&mut out));
        assert_eq!(q.bytes(), 0);
    }
}
