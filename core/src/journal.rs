//! The JSON Lines journal: the line format, its checksum, the validating reader and the
//! append-only writer (docs/FORMATS.md, journals).
//!
//! # Line format
//!
//! Every line is one compact JSON object followed by `\n`:
//!
//! ```text
//! {"v":1,"seq":7,"ts":1767225600000,"body":{"kind":"started"},"crc":"9d9be5d8"}
//! ```
//!
//! - `v` is the schema version ([`JOURNAL_VERSION`]); `seq` counts 1, 2, 3 … with no gaps;
//!   `ts` is the wall time of the append in unix milliseconds; `body` is the payload.
//! - `crc` is the CRC-32 (IEEE, as in zlib) of every byte of the line *before* the text
//!   `"crc":"`, that is from the opening `{` up to and including the comma after the body,
//!   written as 8 lowercase hex digits. The field is always last, so the line always ends with
//!   the fixed-width [`CHECKSUM_SUFFIX_LEN`] bytes `"crc":"xxxxxxxx"}`, and a reader can verify
//!   the checksum over raw bytes before parsing any JSON.
//!
//! # Reading
//!
//! A torn tail is a final line without its terminating newline: an append a crash cut short
//! (a writer appends a line and its newline in one write, so a cut never leaves a newline at
//! the end of a partial line). It is reported and left out, and the next writer truncates it.
//! Every complete line, the final one included, must verify: a line that ends in its newline
//! and fails its checksum or its JSON was written whole and damaged later (a flipped bit, a
//! foreign writer), so it is corruption. The read fails with the file, the line number and the
//! reason, and no writer truncates or appends after it; nothing is guessed or rewritten.

use crate::env::{parent_dir, Fs, FsError, FsErrorKind};
use crate::time::WallTime;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::RangeInclusive;

/// The schema version this code writes, and the newest it reads.
pub(crate) const JOURNAL_VERSION: u32 = 1;

/// Bytes of the fixed checksum field that closes every line: `"crc":"xxxxxxxx"}`.
pub(crate) const CHECKSUM_SUFFIX_LEN: usize = CRC_OPEN.len() + 8 + CRC_CLOSE.len();

const CRC_OPEN: &[u8] = b"\"crc\":\"";
const CRC_CLOSE: &[u8] = b"\"}";
const HEX: &[u8; 16] = b"0123456789abcdef";

/// One verified journal line.
#[derive(Clone, Debug, PartialEq)]
pub struct Record<B = serde_json::Value> {
    /// Schema version the line was written with.
    pub v: u32,
    /// Position in the journal, starting at 1.
    pub seq: u64,
    /// Wall time of the append.
    pub ts: WallTime,
    /// The payload.
    pub body: B,
}

/// The verified content of a journal file.
#[derive(Clone, Debug, PartialEq)]
pub struct JournalRead<B = serde_json::Value> {
    /// Every complete, verified line, in order; `records[i].seq == first_seq + i`.
    pub records: Vec<Record<B>>,
    /// The sequence number of the first line read (1 unless the read continued a journal).
    pub first_seq: u64,
    /// Length of the verified prefix of the file, which ends on a line boundary.
    pub valid_len: u64,
    /// Bytes after `valid_len` that belong to a torn final line (0 when the file is clean).
    pub torn_tail_bytes: u64,
}

impl<B> JournalRead<B> {
    /// The `seq` the next appended line must carry.
    pub fn next_seq(&self) -> u64 {
        self.first_seq + self.records.len() as u64
    }
}

/// Why a journal line was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JournalErrorReason {
    /// The line does not end with a well-formed `"crc":"xxxxxxxx"}` field.
    MissingChecksum,
    /// The checksum field does not match the line's bytes.
    ChecksumMismatch,
    /// The bytes verify but are not a journal record (bad JSON, missing or mistyped field).
    BadRecord(String),
    /// The line's `seq` is not one more than the previous line's.
    BadSeq {
        /// The `seq` the line should have carried.
        expected: u64,
        /// The `seq` it carried.
        found: u64,
    },
    /// The line's schema version is 0 or newer than [`JOURNAL_VERSION`].
    UnsupportedVersion(u64),
}

impl fmt::Display for JournalErrorReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JournalErrorReason::MissingChecksum => f.write_str("missing checksum"),
            JournalErrorReason::ChecksumMismatch => f.write_str("checksum mismatch"),
            JournalErrorReason::BadRecord(why) => write!(f, "bad record: {why}"),
            JournalErrorReason::BadSeq { expected, found } => {
                write!(f, "seq {found} where {expected} was expected")
            }
            JournalErrorReason::UnsupportedVersion(v) => write!(
                f,
                "schema version {v} is not supported (this harn reads 1 to {JOURNAL_VERSION})"
            ),
        }
    }
}

/// A corrupt journal: which file, which line, and why. Displays as `events.jsonl:17: checksum
/// mismatch`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalError {
    /// The file, as the caller named it.
    pub path: String,
    /// The 1-based line number of the bad line.
    pub line: u64,
    /// What is wrong with it.
    pub reason: JournalErrorReason,
}

impl fmt::Display for JournalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.path, self.line, self.reason)
    }
}

impl std::error::Error for JournalError {}

/// Appends one encoded line for `body` to `out`.
///
/// Panics if `body` cannot be serialized as JSON (for example a map with non-string keys):
/// that is a bug in the caller's type, not a runtime condition.
pub fn encode_line_into(out: &mut Vec<u8>, seq: u64, ts: WallTime, body: &impl Serialize) {
    encode_line_with(out, seq, ts, |out| {
        serde_json::to_writer(out, body).expect("journal bodies serialize to JSON")
    });
}

/// [`encode_line_into`] with the body's compact JSON written by `write_body`: for a body type
/// that writes its own JSON faster than serde (and is tested to write serde's bytes).
pub(crate) fn encode_line_with(
    out: &mut Vec<u8>,
    seq: u64,
    ts: WallTime,
    write_body: impl FnOnce(&mut Vec<u8>),
) {
    assert!(seq >= 1, "journal seqs start at 1");
    let start = out.len();
    out.extend_from_slice(b"{\"v\":");
    push_decimal(out, u64::from(JOURNAL_VERSION));
    out.extend_from_slice(b",\"seq\":");
    push_decimal(out, seq);
    out.extend_from_slice(b",\"ts\":");
    if ts.0 < 0 {
        out.push(b'-');
    }
    push_decimal(out, ts.0.unsigned_abs());
    out.extend_from_slice(b",\"body\":");
    let body_start = out.len();
    write_body(out);
    // Compact JSON escapes control characters, so a newline here would split the record.
    assert!(!out[body_start..].contains(&b'\n'), "a journal body serialized with a raw newline");
    out.push(b',');
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(CRC_OPEN);
    out.extend_from_slice(&hex8(crc));
    out.extend_from_slice(CRC_CLOSE);
    out.push(b'\n');
}

/// One encoded line for `body`, ending in `\n`. See [`encode_line_into`].
pub fn encode_line(seq: u64, ts: WallTime, body: &impl Serialize) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    encode_line_into(&mut out, seq, ts, body);
    out
}

/// Appends `n` in decimal, with its sign.
pub(crate) fn push_signed(out: &mut Vec<u8>, n: i64) {
    if n < 0 {
        out.push(b'-');
    }
    push_decimal(out, n.unsigned_abs());
}

/// Appends `n` in decimal.
pub(crate) fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    // Two digits per division, from a table: every line carries a 13-digit timestamp.
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        i -= 2;
        digits[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        let pair = n as usize * 2;
        i -= 2;
        digits[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        i -= 1;
        digits[i] = b'0' + n as u8;
    }
    out.extend_from_slice(&digits[i..]);
}

fn hex8(crc: u32) -> [u8; 8] {
    let mut hex = [0u8; 8];
    for (i, h) in hex.iter_mut().enumerate() {
        *h = HEX[((crc >> (28 - 4 * i)) & 0xf) as usize];
    }
    hex
}

/// Checks the checksum of one line (without its `\n`) over its raw bytes.
fn verify_checksum(line: &[u8]) -> Result<(), JournalErrorReason> {
    let Some(covered_len) = line.len().checked_sub(CHECKSUM_SUFFIX_LEN) else {
        return Err(JournalErrorReason::MissingChecksum);
    };
    let (covered, suffix) = line.split_at(covered_len);
    let (open, rest) = suffix.split_at(CRC_OPEN.len());
    let (hex, close) = rest.split_at(8);
    if open != CRC_OPEN || close != CRC_CLOSE || !covered.ends_with(b",") {
        return Err(JournalErrorReason::MissingChecksum);
    }
    if hex != hex8(crc32fast::hash(covered)) {
        return Err(JournalErrorReason::ChecksumMismatch);
    }
    Ok(())
}

/// The fields of a line as serde sees them. The `crc` field is skipped here: it was verified
/// over the raw bytes already.
#[derive(Deserialize)]
struct Line<B> {
    v: u64,
    seq: u64,
    ts: WallTime,
    body: B,
}

/// Only the version, to explain a line that a typed body could not decode.
#[derive(Deserialize)]
struct VersionOnly {
    v: u64,
}

fn decode_line<B: DeserializeOwned>(
    line: &[u8],
    expected_seq: u64,
) -> Result<Record<B>, JournalErrorReason> {
    let parsed = match canonical_line(line) {
        Some(parsed) => parsed,
        None => general_line(line)?,
    };
    if !version_supported(parsed.v) {
        return Err(JournalErrorReason::UnsupportedVersion(parsed.v));
    }
    if parsed.seq != expected_seq {
        return Err(JournalErrorReason::BadSeq { expected: expected_seq, found: parsed.seq });
    }
    // The range check above makes the narrowing exact.
    let v = parsed.v as u32;
    Ok(Record { v, seq: parsed.seq, ts: parsed.ts, body: parsed.body })
}

/// A line exactly as [`encode_line_into`] writes it (`{"v":N,"seq":N,"ts":N,"body":…,` and the
/// checksum field, no space, numbers without leading zeros), read by matching its fixed parts
/// and handing only the body to serde: about half of what a whole line costs serde, since the
/// envelope is most of a short record. Anything else is `None`, and [`general_line`] reads it
/// or refuses it with serde's own message, so the two paths accept the same lines.
fn canonical_line<B: DeserializeOwned>(line: &[u8]) -> Option<Line<B>> {
    let rest = line.strip_prefix(b"{\"v\":")?;
    let (v, rest) = canonical_u64(rest)?;
    let rest = rest.strip_prefix(b",\"seq\":")?;
    let (seq, rest) = canonical_u64(rest)?;
    let rest = rest.strip_prefix(b",\"ts\":")?;
    let (negative, rest) = match rest.strip_prefix(b"-") {
        Some(rest) => (true, rest),
        None => (false, rest),
    };
    let (magnitude, rest) = canonical_u64(rest)?;
    let ts = match negative {
        true if magnitude == 0 => return None,
        true => 0i64.checked_sub_unsigned(magnitude)?,
        false => i64::try_from(magnitude).ok()?,
    };
    let rest = rest.strip_prefix(b",\"body\":")?;
    let body_len = rest.len().checked_sub(1 + CHECKSUM_SUFFIX_LEN)?;
    let (body, tail) = rest.split_at(body_len);
    let hex = tail.strip_prefix(b",")?.strip_prefix(CRC_OPEN)?.strip_suffix(CRC_CLOSE)?;
    if !hex.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let body = serde_json::from_slice(body).ok()?;
    Some(Line { v, seq, ts: WallTime(ts), body })
}

/// A decimal without sign or leading zero that fits a `u64`, and the bytes after it.
pub(crate) fn canonical_u64(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || (digits > 1 && bytes[0] == b'0') {
        return None;
    }
    let mut n: u64 = 0;
    for &d in &bytes[..digits] {
        n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some((n, &bytes[digits..]))
}

/// Any line serde reads as a record, or serde's reason why not.
fn general_line<B: DeserializeOwned>(line: &[u8]) -> Result<Line<B>, JournalErrorReason> {
    serde_json::from_slice(line).map_err(|e| {
        // A newer writer may have changed the body; say so rather than "bad record".
        match serde_json::from_slice::<VersionOnly>(line) {
            Ok(VersionOnly { v }) if !version_supported(v) => {
                JournalErrorReason::UnsupportedVersion(v)
            }
            _ => JournalErrorReason::BadRecord(e.to_string()),
        }
    })
}

fn version_supported(v: u64) -> bool {
    (1..=u64::from(JOURNAL_VERSION)).contains(&v)
}

/// Reads and verifies a journal whose bodies are decoded as `B`. `path` only names the file in
/// errors. See the module documentation for what counts as a torn tail and what as corruption.
pub fn parse_as<B: DeserializeOwned>(
    path: &str,
    bytes: &[u8],
) -> Result<JournalRead<B>, JournalError> {
    parse_continuing_as(path, bytes, 1)
}

/// Like [`parse_as`], for the part of a journal that starts at line (and sequence number)
/// `first_seq`: a reader that already verified the lines before can verify only what was
/// appended since. `valid_len` counts from the start of `bytes`.
pub fn parse_continuing_as<B: DeserializeOwned>(
    path: &str,
    bytes: &[u8],
    first_seq: u64,
) -> Result<JournalRead<B>, JournalError> {
    assert!(first_seq >= 1, "sequence numbers start at 1");
    let mut records = Vec::new();
    let mut pos = 0usize;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        let Some(nl) = find_newline(rest) else {
            break; // No newline: an incomplete final line.
        };
        let line = &rest[..nl];
        let line_no = first_seq + records.len() as u64;
        let fail = |reason| JournalError { path: path.to_owned(), line: line_no, reason };
        verify_checksum(line).map_err(fail)?;
        records.push(decode_line(line, line_no).map_err(fail)?);
        pos += nl + 1;
    }
    debug_assert!(pos == 0 || bytes[pos - 1] == b'\n');
    let torn_tail_bytes = (bytes.len() - pos) as u64;
    Ok(JournalRead { records, first_seq, valid_len: pos as u64, torn_tail_bytes })
}

/// What [`salvage_as`] kept of a damaged journal.
#[derive(Debug)]
pub struct Salvaged<B> {
    /// The bodies of the lines that verify on their own (checksum, JSON, body), in order.
    pub kept: Vec<B>,
    /// Each line left out, with why (its line number, as the file has it).
    pub damaged: Vec<JournalError>,
}

/// The lines of a damaged journal that verify on their own, for a journal whose records each
/// stand alone (an outbox, where a lost line costs one record, never the meaning of the rest):
/// every complete line is checked by its checksum and decoded, its sequence number not held to
/// its position (a line cut out moves every later one), and each line that fails is named. A
/// final line without its newline is a torn tail and is left out, as [`parse_as`] leaves it.
pub fn salvage_as<B: DeserializeOwned>(path: &str, bytes: &[u8]) -> Salvaged<B> {
    let mut out = Salvaged { kept: Vec::new(), damaged: Vec::new() };
    for (at, line) in bytes.split_inclusive(|&b| b == b'\n').enumerate() {
        let Some(line) = line.strip_suffix(b"\n") else { break };
        let line_no = at as u64 + 1;
        let fail = |reason| JournalError { path: path.to_owned(), line: line_no, reason };
        let decoded = verify_checksum(line).and_then(|()| match decode_line::<B>(line, line_no) {
            Err(JournalErrorReason::BadSeq { found, .. }) => decode_line::<B>(line, found),
            other => other,
        });
        match decoded {
            Ok(record) => out.kept.push(record.body),
            Err(reason) => out.damaged.push(fail(reason)),
        }
    }
    out
}

/// Bytes a streaming read takes from the file at a time.
pub(crate) const STREAM_CHUNK: usize = 1 << 20;

/// The longest line a streaming read accepts; a longer one is corruption (harn writes none).
pub(crate) const LINE_MAX: usize = 16 << 20;

/// Why a streaming read stopped.
#[derive(Debug)]
pub enum EachError<E> {
    /// The file could not be read.
    Fs(FsError),
    /// A line is damaged: the file, the line and why.
    Corrupt(JournalError),
    /// The caller's function refused a record.
    Refused(E),
}

/// Reads `path` one verified record at a time, in chunks of [`STREAM_CHUNK`] through
/// [`Fs::read_at`], handing each to `each` in order: memory stays bounded by a chunk and the
/// longest line, however long the journal. As [`parse_as`], a final line without its newline
/// is a torn tail and is left out, and a damaged complete line fails with its line number
/// (`shown` names the file). Returns the length of the verified lines and of a torn tail, or
/// `None` when the file does not exist.
pub fn read_each<B: DeserializeOwned, E>(
    fs: &mut dyn Fs,
    path: &str,
    shown: &str,
    each: impl FnMut(Record<B>) -> Result<(), E>,
) -> Result<Option<(u64, u64)>, EachError<E>> {
    read_each_in(fs, path, shown, STREAM_CHUNK, each)
}

/// [`read_each`] in chunks of `chunk` bytes.
pub(crate) fn read_each_in<B: DeserializeOwned, E>(
    fs: &mut dyn Fs,
    path: &str,
    shown: &str,
    chunk: usize,
    mut each: impl FnMut(Record<B>) -> Result<(), E>,
) -> Result<Option<(u64, u64)>, EachError<E>> {
    let mut offset = 0u64;
    let mut pending: Vec<u8> = Vec::new();
    let mut line_no = 1u64;
    let mut valid = 0u64;
    loop {
        let Some((bytes, total)) = fs.read_at(path, offset, chunk).map_err(EachError::Fs)? else {
            return Ok(None);
        };
        let last = bytes.is_empty() || offset + bytes.len() as u64 >= total;
        offset += bytes.len() as u64;
        pending.extend_from_slice(&bytes);
        let mut pos = 0usize;
        while let Some(nl) = find_newline(&pending[pos..]) {
            let line = &pending[pos..pos + nl];
            let fail = |reason| {
                EachError::Corrupt(JournalError { path: shown.to_owned(), line: line_no, reason })
            };
            verify_checksum(line).map_err(fail)?;
            let record = decode_line(line, line_no).map_err(fail)?;
            each(record).map_err(EachError::Refused)?;
            pos += nl + 1;
            valid += nl as u64 + 1;
            line_no += 1;
        }
        pending.drain(..pos);
        if pending.len() > LINE_MAX {
            let reason =
                JournalErrorReason::BadRecord(format!("a line longer than {LINE_MAX} bytes"));
            return Err(EachError::Corrupt(JournalError {
                path: shown.to_owned(),
                line: line_no,
                reason,
            }));
        }
        if last {
            return Ok(Some((valid, pending.len() as u64)));
        }
    }
}

/// What a writer needs to know to append: where the valid lines end and the next sequence
/// number. Found from the end of the file, without parsing every line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TailScan {
    /// Bytes of whole, verified lines at the start of the file.
    pub valid_len: u64,
    /// The sequence number of the next line to append.
    pub next_seq: u64,
    /// Bytes after `valid_len`: a torn tail from a crash.
    pub torn_tail_bytes: u64,
}

/// Finds the torn tail (the bytes after the last newline) and the next sequence number by
/// verifying only the last complete line and checking that the line before it carries the
/// previous sequence number. Lines further back are verified by readers, not here: a writer
/// only appends, so it never builds on them, and its boot stays O(1) in the length of the
/// file. A last complete line that fails is corruption, as in [`parse_as`].
pub(crate) fn scan_tail(path: &str, bytes: &[u8]) -> Result<TailScan, JournalError> {
    let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let torn = (bytes.len() - end) as u64;
    let fail = |at: usize, reason| {
        let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() as u64 + 1;
        JournalError { path: path.to_owned(), line, reason }
    };
    if end == 0 {
        return Ok(TailScan { valid_len: 0, next_seq: 1, torn_tail_bytes: torn });
    }
    let start = line_start(bytes, end - 1);
    let line = &bytes[start..end - 1];
    verify_checksum(line).map_err(|r| fail(start, r))?;
    let seq = decode_seq(line).map_err(|r| fail(start, r))?;
    check_previous_seq(bytes, start, seq).map_err(|(at, r)| fail(at, r))?;
    let Some(next_seq) = seq.checked_add(1) else {
        let reason = JournalErrorReason::BadRecord("seq is at its maximum".into());
        return Err(fail(start, reason));
    };
    Ok(TailScan { valid_len: end as u64, next_seq, torn_tail_bytes: torn })
}

/// [`scan_tail`] over the end of a file read through [`Fs::read_at`]: a window that doubles
/// until it holds the last two complete lines, so the cost does not grow with the journal.
/// A damaged line is reported from a read of the whole file, which knows its line number.
/// `None` when the file does not exist.
fn scan_file_tail(fs: &mut dyn Fs, path: &str) -> Result<Option<TailScan>, JournalOpenError> {
    scan_file_tail_in(fs, path, 64 << 10)
}

/// [`scan_file_tail`] from a first window of `window` bytes.
pub(crate) fn scan_file_tail_in(
    fs: &mut dyn Fs,
    path: &str,
    window: u64,
) -> Result<Option<TailScan>, JournalOpenError> {
    let mut window = window.max(1);
    loop {
        let Some((_, total)) = fs.read_at(path, 0, 0)? else { return Ok(None) };
        let from = total.saturating_sub(window);
        let Some((tail, _)) = fs.read_at(path, from, window as usize)? else { return Ok(None) };
        let whole = from == 0;
        // The last complete line and the one before it must both start inside the window.
        let newlines = tail.iter().filter(|&&b| b == b'\n').count();
        if whole || newlines >= 3 {
            let skip =
                if whole { 0 } else { tail.iter().position(|&b| b == b'\n').unwrap_or(0) + 1 };
            let part = &tail[skip..];
            match scan_tail(path, part) {
                Ok(scan) if whole || scan.valid_len > 0 => {
                    let base = from + skip as u64;
                    let valid_len = if scan.valid_len == 0 { base } else { base + scan.valid_len };
                    return Ok(Some(TailScan { valid_len, ..scan }));
                }
                _ => {
                    let bytes = fs.read(path)?.unwrap_or_default();
                    return Ok(Some(scan_tail(path, &bytes)?));
                }
            }
        }
        if window >= total {
            let bytes = fs.read(path)?.unwrap_or_default();
            return Ok(Some(scan_tail(path, &bytes)?));
        }
        window *= 4;
    }
}

/// The offset where the line ending just before `newline_at` begins.
fn line_start(bytes: &[u8], newline_at: usize) -> usize {
    bytes[..newline_at].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)
}

/// The sequence number of a verified line, checking its version.
fn decode_seq(line: &[u8]) -> Result<u64, JournalErrorReason> {
    let header: Line<IgnoredAny> =
        serde_json::from_slice(line).map_err(|e| JournalErrorReason::BadRecord(e.to_string()))?;
    if !version_supported(header.v) {
        return Err(JournalErrorReason::UnsupportedVersion(header.v));
    }
    Ok(header.seq)
}

/// The line before the one at `start` must verify and carry `seq - 1`; the first line `1`.
/// An error carries the offset of the line it is about.
fn check_previous_seq(
    bytes: &[u8],
    start: usize,
    seq: u64,
) -> Result<(), (usize, JournalErrorReason)> {
    if start == 0 {
        return match seq {
            1 => Ok(()),
            found => Err((0, JournalErrorReason::BadSeq { expected: 1, found })),
        };
    }
    let previous_start = line_start(bytes, start - 1);
    let previous = &bytes[previous_start..start - 1];
    verify_checksum(previous).map_err(|r| (previous_start, r))?;
    let before = decode_seq(previous).map_err(|r| (previous_start, r))?;
    if before.checked_add(1) != Some(seq) {
        let expected = before.saturating_add(1);
        return Err((start, JournalErrorReason::BadSeq { expected, found: seq }));
    }
    Ok(())
}

/// The body of one complete line (without its `\n`), once its checksum and version verify:
/// for a reader that looks at a journal's last lines only.
pub(crate) fn verified_body(line: &[u8]) -> Result<serde_json::Value, JournalErrorReason> {
    verify_checksum(line)?;
    let read: Line<serde_json::Value> =
        serde_json::from_slice(line).map_err(|e| JournalErrorReason::BadRecord(e.to_string()))?;
    if !version_supported(read.v) {
        return Err(JournalErrorReason::UnsupportedVersion(read.v));
    }
    Ok(read.body)
}

/// Reads and verifies a journal with untyped bodies. See [`parse_as`].
pub fn parse(path: &str, bytes: &[u8]) -> Result<JournalRead, JournalError> {
    parse_as(path, bytes)
}

/// Position of the first `\n` in `bytes`.
fn find_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

/// A damaged history journal renamed aside at boot ([`JournalWriter::open_setting_aside`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetAside {
    /// Where it is now.
    pub moved_to: String,
    /// What was found: the file, the line and why.
    pub damage: String,
}

/// Why a journal could not be opened for appending.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JournalOpenError {
    /// Reading the file, or truncating its torn tail, failed.
    Fs(FsError),
    /// The file is corrupt; it is left exactly as it is.
    Corrupt(JournalError),
}

impl fmt::Display for JournalOpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JournalOpenError::Fs(e) => e.fmt(f),
            JournalOpenError::Corrupt(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for JournalOpenError {}

impl From<FsError> for JournalOpenError {
    fn from(e: FsError) -> JournalOpenError {
        JournalOpenError::Fs(e)
    }
}

impl From<JournalError> for JournalOpenError {
    fn from(e: JournalError) -> JournalOpenError {
        JournalOpenError::Corrupt(e)
    }
}

/// Appends records to one journal file through the [`Fs`] seam.
///
/// Every append is one `append` call followed by `sync_file`, so a crash leaves either whole
/// synced lines or a torn tail that the next [`JournalWriter::open`] cuts off. After a failed
/// append the end of the file is unknown, so the writer refuses further appends until the
/// journal is opened again.
#[derive(Clone, Debug)]
pub struct JournalWriter {
    path: String,
    next_seq: u64,
    len: u64,
    exists: bool,
    poisoned: Option<FsErrorKind>,
}

impl JournalWriter {
    /// Reads and verifies `path` (a missing file is an empty journal) and cuts off a torn tail,
    /// syncing the cut, so the next append starts on a line boundary. Returns the writer and
    /// everything that was read.
    pub fn open(
        fs: &mut dyn Fs,
        path: &str,
    ) -> Result<(JournalWriter, JournalRead), JournalOpenError> {
        JournalWriter::open_as(fs, path)
    }

    /// Opens for appending after verifying only the tail (see [`scan_tail`]) and cutting off a
    /// torn tail. The boot path of a long-lived writer: its cost does not grow with the file.
    pub fn open_tail(
        fs: &mut dyn Fs,
        path: &str,
    ) -> Result<(JournalWriter, TailScan), JournalOpenError> {
        let (scan, exists) = match scan_file_tail(fs, path)? {
            None => (TailScan { valid_len: 0, next_seq: 1, torn_tail_bytes: 0 }, false),
            Some(scan) => (scan, true),
        };
        let writer = JournalWriter::positioned(fs, path, exists, scan)?;
        Ok((writer, scan))
    }

    /// [`JournalWriter::open`] with bodies decoded as `B`. A writer that does not need the
    /// records opens with `serde::de::IgnoredAny`: every line is still verified, but no body
    /// is materialized, which keeps a boot over a long journal cheap.
    pub(crate) fn open_as<B: DeserializeOwned>(
        fs: &mut dyn Fs,
        path: &str,
    ) -> Result<(JournalWriter, JournalRead<B>), JournalOpenError> {
        let (read, exists) = match fs.read(path)? {
            None => {
                let empty = JournalRead {
                    records: Vec::new(),
                    first_seq: 1,
                    valid_len: 0,
                    torn_tail_bytes: 0,
                };
                (empty, false)
            }
            Some(bytes) => (parse_as(path, &bytes)?, true),
        };
        let scan = TailScan {
            valid_len: read.valid_len,
            next_seq: read.next_seq(),
            torn_tail_bytes: read.torn_tail_bytes,
        };
        let writer = JournalWriter::positioned(fs, path, exists, scan)?;
        Ok((writer, read))
    }

    /// [`JournalWriter::open_as`] for a journal that is history only (a daemon's events, its
    /// recovery ledger), which must not hold a boot hostage: a damaged one is renamed aside
    /// whole, as `PATH.damaged-<wall ms>` (the rename synced), and a new one begun. What was set
    /// aside, and why, is returned for the caller to record.
    pub fn open_setting_aside(
        fs: &mut dyn Fs,
        path: &str,
        now: crate::time::WallTime,
    ) -> Result<(JournalWriter, Option<SetAside>), FsError> {
        match JournalWriter::open_as::<serde::de::IgnoredAny>(fs, path) {
            Ok((writer, _)) => Ok((writer, None)),
            Err(JournalOpenError::Fs(e)) => Err(e),
            Err(JournalOpenError::Corrupt(damage)) => {
                let moved_to = format!("{path}.damaged-{}", now.0);
                fs.rename(path, &moved_to)?;
                let dir = path.rsplit_once('/').map_or(".", |(d, _)| d);
                fs.sync_dir(dir)?;
                let (writer, _) = JournalWriter::open_as::<serde::de::IgnoredAny>(fs, path)
                    .map_err(|e| match e {
                        JournalOpenError::Fs(e) => e,
                        JournalOpenError::Corrupt(_) => {
                            unreachable!("a journal begun anew is empty")
                        }
                    })?;
                Ok((writer, Some(SetAside { moved_to, damage: damage.to_string() })))
            }
        }
    }

    /// A writer positioned after the verified lines, with any torn tail cut off and the cut
    /// synced, so the next append starts on a line boundary.
    fn positioned(
        fs: &mut dyn Fs,
        path: &str,
        exists: bool,
        scan: TailScan,
    ) -> Result<JournalWriter, FsError> {
        if scan.torn_tail_bytes > 0 {
            fs.truncate(path, scan.valid_len)?;
            fs.sync_file(path)?;
        }
        Ok(JournalWriter {
            path: path.to_owned(),
            next_seq: scan.next_seq,
            len: scan.valid_len,
            exists,
            poisoned: None,
        })
    }

    /// The `seq` the next appended record will carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The file this writer appends to.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Bytes in the file as far as this writer knows: all of them whole, synced lines.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when the journal holds no records.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes one line per body in a single `append` (or `create_new` plus `sync_dir` of the
    /// parent when the file does not exist yet), then syncs the file. Returns the seqs written;
    /// the range is empty when `bodies` is. When this returns `Ok`, the records are durable.
    pub fn append<B: Serialize>(
        &mut self,
        fs: &mut dyn Fs,
        ts: WallTime,
        bodies: &[B],
    ) -> Result<RangeInclusive<u64>, FsError> {
        self.append_with(fs, ts, bodies, |body, out| {
            serde_json::to_writer(out, body).expect("journal bodies serialize to JSON")
        })
    }

    /// [`JournalWriter::append`] with each body's JSON written by `write_body` (see
    /// [`encode_line_with`]).
    pub(crate) fn append_with<B>(
        &mut self,
        fs: &mut dyn Fs,
        ts: WallTime,
        bodies: &[B],
        write_body: impl Fn(&B, &mut Vec<u8>),
    ) -> Result<RangeInclusive<u64>, FsError> {
        if let Some(kind) = self.poisoned {
            return Err(FsError::new(
                kind,
                &self.path,
                "an earlier append failed; reopen the journal",
            ));
        }
        let first = self.next_seq;
        if bodies.is_empty() {
            return Ok(first..=first - 1);
        }
        let mut buf = Vec::with_capacity(bodies.len() * 256);
        for (i, body) in bodies.iter().enumerate() {
            encode_line_with(&mut buf, first + i as u64, ts, |out| write_body(body, out));
        }
        if let Err(e) = self.write_synced(fs, &buf) {
            self.poisoned = Some(e.kind);
            return Err(e);
        }
        self.exists = true;
        self.len += buf.len() as u64;
        self.next_seq = first + bodies.len() as u64;
        Ok(first..=self.next_seq - 1)
    }

    /// After an append failed (a full disk): cuts whatever part of it reached the file, so
    /// the journal ends at its last whole record again and the next append may be tried.
    /// The records that failed are not written; the caller counts them.
    pub fn recover(&mut self, fs: &mut dyn Fs) -> Result<(), FsError> {
        if self.poisoned.is_none() {
            return Ok(());
        }
        if self.exists {
            // Cutting frees space; it needs none.
            fs.truncate(&self.path, self.len)?;
            fs.sync_file(&self.path)?;
        } else {
            fs.remove(&self.path)?;
        }
        self.poisoned = None;
        Ok(())
    }

    /// Starts a new file once this one holds `cap.max_file_bytes` or more: `PATH` becomes
    /// `PATH.1`, `PATH.1` becomes `PATH.2` and so on, the oldest past `cap.kept` dropped. The
    /// renames are synced before it returns, so nothing is appended to the new file while
    /// the old one could still come back under its name after a crash. Each file is a whole
    /// journal: the next line is seq 1 of the new file. Returns whether it rotated.
    pub fn rotate_if_full(&mut self, fs: &mut dyn Fs, cap: Retention) -> Result<bool, FsError> {
        if self.len < cap.max_file_bytes || !self.exists {
            return Ok(false);
        }
        let dir = parent_dir(&self.path).to_owned();
        let name = self.path.rsplit('/').next().unwrap_or(&self.path).to_owned();
        let present = fs.list(&dir)?;
        let rotated = |i: u32| format!("{}.{i}", self.path);
        let kept = cap.kept.max(1);
        if present.contains(&format!("{name}.{kept}")) {
            fs.remove(&rotated(kept))?;
        }
        for i in (1..kept).rev() {
            if present.contains(&format!("{name}.{i}")) {
                fs.rename(&rotated(i), &rotated(i + 1))?;
            }
        }
        fs.rename(&self.path, &rotated(1))?;
        fs.sync_dir(&dir)?;
        self.exists = false;
        self.len = 0;
        self.next_seq = 1;
        Ok(true)
    }

    fn write_synced(&self, fs: &mut dyn Fs, buf: &[u8]) -> Result<(), FsError> {
        if self.exists {
            fs.append(&self.path, buf)?;
            fs.sync_file(&self.path)
        } else {
            // Sync the bytes before the entry, so the name never appears without its lines.
            fs.create_new(&self.path, buf)?;
            fs.sync_file(&self.path)?;
            fs.sync_dir(parent_dir(&self.path))
        }
    }
}

/// The least `Retention::max_file_bytes` may be: a few records' worth, so a file always holds
/// whole decisions.
pub(crate) const RETENTION_FILE_MIN: u64 = 4 << 10;

/// How much of a journal is kept: files rotate at `max_file_bytes`, and `kept` rotated files
/// (`PATH.1` newest … `PATH.kept` oldest) are kept beside the current one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    /// Size at which the current file is rotated.
    pub max_file_bytes: u64,
    /// Rotated files kept.
    pub kept: u32,
}

impl Retention {
    /// Refuses limits that would keep no whole history: `(key, why)`, the key as
    /// `harness.toml` names it under `[retention]`.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if self.max_file_bytes < RETENTION_FILE_MIN {
            let why = format!(
                "{} is under the least a file may hold ({RETENTION_FILE_MIN} bytes)",
                self.max_file_bytes
            );
            return Err(("max_file_bytes", why));
        }
        if self.kept == 0 {
            let why = "0 would keep no history: keep at least one rotated file".to_owned();
            return Err(("rotated_kept", why));
        }
        Ok(())
    }
}

impl Default for Retention {
    /// 8 MiB a file, five rotated files: at most 48 MiB per journal.
    fn default() -> Retention {
        Retention { max_file_bytes: 8 << 20, kept: 5 }
    }
}

/// Fuzz body: parses arbitrary bytes and checks what the reader accepted against an independent
/// re-verification. Never panics on any input unless the reader is wrong.
#[doc(hidden)]
pub fn fuzz_reader(data: &[u8]) {
    let tail = scan_tail("fuzz.jsonl", data);
    // A salvage names or keeps every complete line, and keeps every one a whole read keeps.
    let salvaged = salvage_as::<serde_json::Value>("fuzz.jsonl", data);
    let complete = data.iter().filter(|&&b| b == b'\n').count();
    assert_eq!(salvaged.kept.len() + salvaged.damaged.len(), complete, "a line went unsaid");
    let Ok(read) = parse("fuzz.jsonl", data) else {
        return;
    };
    assert!(salvaged.damaged.is_empty(), "a salvage refused a line the whole read took");
    let bodies: Vec<&serde_json::Value> = read.records.iter().map(|r| &r.body).collect();
    assert_eq!(salvaged.kept.iter().collect::<Vec<_>>(), bodies, "a salvage changed a record");
    // Whenever the whole file verifies, the writer's tail-only scan must agree with it.
    let tail = tail.expect("the tail scan accepts every journal the full parse accepts");
    assert_eq!(tail.valid_len, read.valid_len, "tail scan and parse disagree on valid_len");
    assert_eq!(tail.next_seq, read.next_seq(), "tail scan and parse disagree on next_seq");
    let valid_len = usize::try_from(read.valid_len).expect("valid_len fits in memory");
    assert_eq!(read.valid_len + read.torn_tail_bytes, data.len() as u64);
    let (valid, tail) = data.split_at(valid_len);
    assert!(valid.is_empty() || valid.ends_with(b"\n"), "valid prefix must end on a line");
    let lines: Vec<&[u8]> = valid.split_inclusive(|&b| b == b'\n').collect();
    assert_eq!(lines.len(), read.records.len());
    for (i, (line, record)) in lines.iter().zip(&read.records).enumerate() {
        assert!(reverify(&line[..line.len() - 1]), "accepted a line whose checksum fails");
        assert_eq!(record.seq, i as u64 + 1, "seqs must be consecutive from 1");
        assert_eq!(record.v, JOURNAL_VERSION);
    }
    // A torn tail is only ever an unfinished final line: a complete line is never dropped.
    assert!(!tail.contains(&b'\n'), "a complete final line was taken for a torn tail");
}

/// A deliberately plain second implementation of the checksum rule, for [`fuzz_reader`].
fn reverify(line: &[u8]) -> bool {
    let Some(at) = line.len().checked_sub(CHECKSUM_SUFFIX_LEN) else {
        return false;
    };
    let text = String::from_utf8_lossy(&line[at..]);
    let expected = format!("\"crc\":\"{:08x}\"}}", crc32fast::hash(&line[..at]));
    at > 0 && line[at - 1] == b',' && text == expected
}

#[cfg(test)]
mod tests;
