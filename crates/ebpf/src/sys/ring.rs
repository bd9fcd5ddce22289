//! The per-CPU ring buffers: their creation, consumption into one buffer, and the epoll set
//! that blocks on them.

use std::cell::RefCell;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::rc::Rc;

use libbpf_rs::{MapCore, MapFlags, MapHandle, MapType, RingBuffer, RingBufferBuilder};

use super::skel::VigilSkel;
use super::{load_err, Bpf};
use crate::EbpfError;

/// Bytes of each per-CPU ring buffer (the kernel-side inner map template's size).
pub const RING_BYTES: u32 = 1 << 22;

/// Records consumed but not yet decoded, `[u32 length][bytes]…` (filled by the reader's
/// callbacks, taken by [`Bpf::consume`]).
pub(super) type Raw = Rc<RefCell<Vec<u8>>>;

/// One ring buffer per CPU ([`RING_BYTES`] each) installed in the programs' `ringbufs` array,
/// and a reader whose callbacks append every record to the returned [`Raw`] buffer.
pub(super) fn create(
    skel: &VigilSkel<'static>,
    ncpus: u32,
) -> Result<(Vec<MapHandle>, RingBuffer<'static>, Raw), EbpfError> {
    let opts = libbpf_rs::libbpf_sys::bpf_map_create_opts {
        sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as _,
        ..Default::default()
    };
    let mut rings = Vec::with_capacity(ncpus as usize);
    for cpu in 0..ncpus {
        let ring = MapHandle::create(
            MapType::RingBuf,
            Some(format!("vigil_rb{cpu}")),
            0,
            0,
            RING_BYTES,
            &opts,
        )
        .map_err(load_err("create a ring buffer"))?;
        let fd = ring.as_fd().as_raw_fd();
        skel.maps
            .ringbufs
            .update(&cpu.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY)
            .map_err(load_err("install a ring buffer"))?;
        rings.push(ring);
    }
    let raw: Rc<RefCell<Vec<u8>>> = Rc::new(RefCell::new(Vec::with_capacity(1 << 20)));
    let mut builder = RingBufferBuilder::new();
    for ring in &rings {
        let raw = Rc::clone(&raw);
        builder
            .add(ring, move |data: &[u8]| {
                let mut raw = raw.borrow_mut();
                let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
                raw.extend_from_slice(&len.to_ne_bytes());
                raw.extend_from_slice(data);
                0
            })
            .map_err(load_err("register a ring buffer"))?;
    }
    let ring = builder
        .build()
        .map_err(load_err("build the ring-buffer reader"))?;
    Ok((rings, ring, raw))
}

/// An epoll set over the ring buffers and a wake descriptor ([`Bpf::waiter`]). The rings are
/// edge-triggered: a wait ends when the kernel wakes the reader, never for a record written
/// without a wakeup (unlike libbpf's level-triggered `ring_buffer__poll`, where such records
/// keep a ring reported once it was).
pub struct Waiter {
    epoll: OwnedFd,
    /// The extra descriptor alone ([`Waiter::wait_extra`]); open as long as the epoll set is
    /// in use (its owner keeps both).
    extra: std::os::fd::RawFd,
}

/// What ended a [`Waiter::wait`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Woken {
    /// The kernel woke the reader: some ring has records.
    pub rings: bool,
    /// The extra descriptor is readable.
    pub extra: bool,
}

impl Waiter {
    const EXTRA: u64 = u64::MAX;

    /// Blocks until the kernel wakes the reader, the extra descriptor becomes readable, a
    /// signal interrupts, or `timeout` (rounded up to the millisecond) has passed.
    pub fn wait(&self, timeout: std::time::Duration) -> Result<Woken, EbpfError> {
        let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 8];
        // SAFETY: `events` is writable for the 8 entries the call is told of.
        let n = unsafe {
            libc::epoll_wait(
                self.epoll.as_raw_fd(),
                events.as_mut_ptr(),
                events.len() as i32,
                ms,
            )
        };
        let mut woken = Woken::default();
        let Some(n) = waited(n)? else {
            return Ok(woken);
        };
        for event in &events[..n] {
            let data = event.u64;
            if data == Self::EXTRA {
                woken.extra = true;
            } else {
                woken.rings = true;
            }
        }
        Ok(woken)
    }

    /// Blocks until the extra descriptor becomes readable, a signal interrupts, or `timeout`
    /// (to the nanosecond) has passed, whatever the kernel says of the rings: for a reader
    /// that will read every ring when the timeout ends anyway. A ring's wakeup meanwhile is
    /// kept by the epoll set and ends its next [`Waiter::wait`] at once. Returns whether the
    /// extra descriptor is readable.
    pub fn wait_extra(&self, timeout: std::time::Duration) -> Result<bool, EbpfError> {
        let mut fd = libc::pollfd {
            fd: self.extra,
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
            tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
        };
        // SAFETY: one valid pollfd, a valid timespec, no signal mask.
        let n = unsafe { libc::ppoll(&mut fd, 1, &ts, std::ptr::null()) };
        Ok(waited(n)?.is_some_and(|n| n > 0) && fd.revents & libc::POLLIN != 0)
    }
}

/// The ready count of a wait call's result `n`: `None` when a signal interrupted it (nothing
/// is ready), an error for any other failure.
fn waited(n: libc::c_int) -> Result<Option<usize>, EbpfError> {
    if n >= 0 {
        return Ok(Some(n as usize));
    }
    let e = std::io::Error::last_os_error();
    if e.kind() == std::io::ErrorKind::Interrupted {
        return Ok(None);
    }
    Err(EbpfError::Poll {
        code: e.raw_os_error().unwrap_or(0).unsigned_abs(),
    })
}

impl Bpf {
    /// An epoll set over every CPU's ring buffer and `extra` (a [`vigil_capture::WakeReceiver`]),
    /// to block on until the kernel wakes the reader (`wake_reason`) or `extra` is readable.
    pub fn waiter(&self, extra: BorrowedFd<'_>) -> Result<Waiter, EbpfError> {
        let fail = |e: std::io::Error| EbpfError::Load {
            what: "set up the wait on the ring buffers",
            message: e.to_string(),
        };
        // SAFETY: epoll_create1 takes flags only; the result is a new descriptor or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(fail(std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
        // The rings edge-triggered: a ring is reported only when the kernel wakes the reader.
        // Level-triggered, a ring once reported would be reported again by every wait that
        // finds a record in it (written since, without a wakeup): on a busy host the reader
        // would never sleep. The wake socket level-triggered: it is emptied before a wait.
        let fds = self
            .rings
            .iter()
            .map(|r| (r.as_fd().as_raw_fd(), libc::EPOLLIN | libc::EPOLLET))
            .enumerate()
            .map(|(i, (fd, events))| (fd, events, i as u64))
            .chain([(extra.as_raw_fd(), libc::EPOLLIN, Waiter::EXTRA)]);
        for (fd, events, data) in fds {
            let mut event = libc::epoll_event {
                events: events as u32,
                u64: data,
            };
            // SAFETY: both descriptors are open (the rings live as long as `self`, `extra` is
            // borrowed); `event` is a valid epoll_event the call only reads.
            let rc =
                unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) };
            if rc != 0 {
                return Err(fail(std::io::Error::last_os_error()));
            }
        }
        Ok(Waiter {
            epoll,
            extra: extra.as_raw_fd(),
        })
    }

    /// Moves every record the kernel has committed into `out` (`[u32 length][bytes]…`).
    pub fn consume(&mut self, out: &mut Vec<u8>) -> Result<(), EbpfError> {
        let n = self.ring.consume_raw();
        if n < 0 {
            return Err(EbpfError::Poll {
                code: n.unsigned_abs(),
            });
        }
        let mut raw = self.raw.borrow_mut();
        if out.is_empty() {
            // No copy: the buffers trade places (and capacities).
            std::mem::swap(out, &mut *raw);
        } else {
            out.append(&mut raw);
        }
        Ok(())
    }
}
