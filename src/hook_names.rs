//! The hooks code outside the hook table asks about by name (whether one was attached, which
//! program to find): one constant each, checked against the table's rows (probe::hooks tests), so
//! a renamed hook fails a test instead of silently reading as "not attached". Pure: the report and
//! aggregation import it without the probe session.

pub const BLOCK_RQ_ISSUE: &str = "block:block_rq_issue";
pub const BLOCK_BIO_BACKMERGE: &str = "block:block_bio_backmerge";
pub const BLOCK_SPLIT: &str = "block:block_split";
pub const SYS_ENTER: &str = "raw_syscalls:sys_enter";
pub const SCHED_SWITCH: &str = "sched:sched_switch";
pub const JBD2_END_COMMIT: &str = "jbd2:jbd2_end_commit";
pub const BALANCE_DIRTY_PAGES: &str = "writeback:balance_dirty_pages";
pub const FILEMAP_GET_PAGES: &str = "filemap:mm_filemap_get_pages";

/// Every name above.
pub const ALL: [&str; 8] = [
    BLOCK_RQ_ISSUE,
    BLOCK_BIO_BACKMERGE,
    BLOCK_SPLIT,
    SYS_ENTER,
    SCHED_SWITCH,
    JBD2_END_COMMIT,
    BALANCE_DIRTY_PAGES,
    FILEMAP_GET_PAGES,
];
