//! What a long-lived process gives back before it sleeps: the heap a busy step freed, and the
//! mappings of code it ran only to start (argument parsing, configuration, boot), so an idle
//! daemon's memory is what its loop uses.

/// Gives the heap that a busy step freed (a boot writes hundreds of ledger records at once)
/// back to the system.
pub fn release_free_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only returns free memory of the allocator to the system; it is
    // thread-safe and has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Unmaps this program's code pages from this process; they stay in the page cache, and
/// the pages the loop runs are mapped again at their next use (a minor fault each). Only the
/// executable mapping is dropped: its pages are never written, so nothing is lost, where the
/// relocated read-only data would be. Returns how many bytes were unmapped.
pub fn shed_code() -> usize {
    let Ok(exe) = std::fs::read_link("/proc/self/exe") else { return 0 };
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else { return 0 };
    let mut shed = 0;
    for (start, end) in code_ranges(&maps, &exe.to_string_lossy()) {
        // SAFETY: the range is a whole mapping of our own executable's code, private and
        // never written; MADV_DONTNEED drops its page table entries, and the next access
        // faults the same bytes in from the file.
        let done =
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
        if done == 0 {
            shed += end - start;
        }
    }
    shed
}

/// The address ranges of `exe`'s executable, private mappings in `/proc/self/maps` text.
fn code_ranges(maps: &str, exe: &str) -> Vec<(usize, usize)> {
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let range = fields.next()?;
            let perms = fields.next()?;
            let path = fields.nth(3)?;
            (perms == "r-xp" && path == exe).then_some(range)
        })
        .filter_map(|range| {
            let (a, b) = range.split_once('-')?;
            Some((usize::from_str_radix(a, 16).ok()?, usize::from_str_radix(b, 16).ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_executables_code_mappings_are_picked() {
        let maps = "\
55a722a1000-55a724df000 r--p 00000000 fe:00 123 /bin/harn
55a724df000-55a72edb000 r-xp 0023e000 fe:00 123 /bin/harn
55a72edb000-55a72f04000 r--p 00c3a000 fe:00 123 /bin/harn
7f830c56c000-7f830c6c2000 r-xp 00028000 fe:00 9 /usr/lib/libc.so.6
7ffd8c6c5000-7ffd8c6e6000 rw-p 00000000 00:00 0 [stack]";
        assert_eq!(code_ranges(maps, "/bin/harn"), vec![(0x55a724df000, 0x55a72edb000)]);
    }

    #[test]
    fn shedding_code_keeps_the_process_running() {
        assert!(shed_code() > 0);
        assert_eq!(code_ranges("", "/x"), vec![]);
    }
}
