//! Child processes that do not outlive the process that started them.
//!
//! A benchmark stopped by a signal (`timeout`, CI, `kill PID`) runs no destructors,
//! so the peers it started (kcptun, aioquic, ngtcp2) would keep running, re-parented
//! to init. On Linux the child asks the kernel, between `fork` and `exec`, for
//! SIGKILL when its parent goes (`prctl(PR_SET_PDEATHSIG)`, prctl(2)). The signal
//! follows the *thread* that spawned the child, so spawn only from a thread that
//! lives as long as the child should: the thread of a runtime, not a blocking-pool
//! thread that may exit when idle. Elsewhere [`end_with_parent`] changes nothing.

use std::process::Command;

/// Arranges for the process `command` spawns to be killed (SIGKILL) when the
/// spawning thread of this process ends, including when this process is killed.
/// A child whose parent is already gone by the time it runs refuses to start
/// (the spawn fails with `ESRCH`).
pub fn end_with_parent(command: &mut Command) -> &mut Command {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let parent = std::process::id();
        // SAFETY: the closure runs in the forked child before `exec`; it calls only
        // prctl(2) and getppid(2), which are async-signal-safe, allocates nothing
        // and reads only `parent`, a copied integer.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent may have died between fork and prctl: then nobody
                // would send the signal.
                if libc::getppid() as u32 != parent {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
    }
    command
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_child_started_this_way_runs_normally() {
        let out = end_with_parent(Command::new("sh").args(["-c", "echo ok"]))
            .output()
            .unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout, b"ok\n");
    }

    #[test]
    fn the_child_is_killed_when_its_spawning_thread_ends() {
        use std::os::unix::process::ExitStatusExt;
        let mut child = std::thread::spawn(|| {
            end_with_parent(Command::new("sleep").arg("30"))
                .spawn()
                .unwrap()
        })
        .join()
        .unwrap();
        // Without the death signal this waits the full 30 s and exits 0.
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    }
}
