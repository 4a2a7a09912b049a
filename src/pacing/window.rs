//! Maintenance windows: `--window 'Sat,Sun 01:00-05:00'` (or `window:` in
//! the inventory). apply starts a node or a batch only when it can finish
//! before the window closes, and stops between nodes once it cannot.
//!
//! The grammar is Kured's (`--reboot-days`, `--start-time`, `--end-time`,
//! `--time-zone`; kubereboot/kured `pkg/timewindow`), in one string:
//! `DAYS START-END [ZONE]`.
//! - DAYS: comma-separated day names as Kured spells them (`su`, `sun`,
//!   `sunday`, …, any case), ranges (`mon-fri`), or `*` for every day;
//! - START and END: `HH:MM` (or `HH:MM:SS`, as Kured also reads) on a
//!   24-hour clock; END at or before START runs past midnight;
//! - ZONE: an IANA name (`Europe/Berlin`) or `UTC`, the default as in
//!   Kured, so a window means the same on every laptop and in CI.
//!
//! One difference from Kured, on purpose: a window that runs past midnight
//! belongs to the day it opens on (`Sat 22:00-02:00` includes Sunday 01:00).
//! Kured checks the day of the current time, so its Saturday night window
//! ends at midnight unless Sunday is listed too.

use std::fmt;
use std::time::Duration;

use jiff::civil::{Date, Time, Weekday};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan, ZonedDateTime as Zoned};

/// A weekly maintenance window in one time zone.
#[derive(Clone)]
pub struct Window {
    /// Bit `n` is set for the day `n` days after Monday.
    days: u8,
    start: Time,
    end: Time,
    zone: TimeZone,
    zone_name: String,
    text: String,
}

impl fmt::Debug for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Window({self})")
    }
}

impl PartialEq for Window {
    fn eq(&self, other: &Self) -> bool {
        self.days == other.days
            && self.start == other.start
            && self.end == other.end
            && self.zone_name == other.zone_name
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Where `now` stands against the window, for a piece of work that may take
/// up to `needed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fit {
    /// Inside the window, with time to finish before it closes at `closes`.
    Fits { closes: Zoned },
    /// Inside the window, but the work could outlast it (`closes`).
    TooLate { closes: Zoned, opens: Zoned },
    /// Outside the window; the next one opens at `opens`.
    Closed { opens: Zoned },
}

const DAY_NAMES: [[&str; 3]; 7] = [
    ["mo", "mon", "monday"],
    ["tu", "tue", "tuesday"],
    ["we", "wed", "wednesday"],
    ["th", "thu", "thursday"],
    ["fr", "fri", "friday"],
    ["sa", "sat", "saturday"],
    ["su", "sun", "sunday"],
];

impl Window {
    /// Parses `DAYS START-END [ZONE]`. The error says what is wrong and
    /// shows the expected form.
    pub fn parse(text: &str) -> Result<Window, String> {
        Window::parse_with(text, |name| TimeZone::get(name).map_err(|e| e.to_string()))
    }

    /// [`Window::parse`] with the time-zone database given, so the tests do
    /// not depend on the host's tzdata.
    fn parse_with(
        text: &str,
        lookup: impl Fn(&str) -> Result<TimeZone, String>,
    ) -> Result<Window, String> {
        let form = "expected DAYS START-END [ZONE], e.g. 'Sat,Sun 01:00-05:00' or \
                    'mon-fri 22:00-04:00 Europe/Berlin'";
        let words: Vec<&str> = text.split_whitespace().collect();
        let (days, times, zone_name) = match words.as_slice() {
            [d, t] => (*d, *t, "UTC"),
            [d, t, z] => (*d, *t, *z),
            _ => return Err(format!("window {text:?}: {form}")),
        };
        let days = parse_days(days).map_err(|e| format!("window {text:?}: {e}; {form}"))?;
        let (start, end) = times
            .split_once('-')
            .ok_or_else(|| format!("window {text:?}: no START-END in {times:?}; {form}"))?;
        let start = parse_time(start).map_err(|e| format!("window {text:?}: {e}"))?;
        let end = parse_time(end).map_err(|e| format!("window {text:?}: {e}"))?;
        if start == end {
            return Err(format!(
                "window {text:?}: it opens and closes at the same time; for all day use 00:00-23:59"
            ));
        }
        let zone = if zone_name.eq_ignore_ascii_case("utc") {
            TimeZone::UTC
        } else {
            lookup(zone_name).map_err(|e| {
                format!("window {text:?}: unknown time zone {zone_name:?} ({e}); use an IANA name such as Europe/Berlin, or UTC")
            })?
        };
        let zone_name = if zone_name.eq_ignore_ascii_case("utc") {
            "UTC".to_owned()
        } else {
            zone_name.to_owned()
        };
        let mut canonical = String::new();
        for (i, names) in DAY_NAMES.iter().enumerate() {
            if days & (1 << i) != 0 {
                if !canonical.is_empty() {
                    canonical.push(',');
                }
                let short = names[1];
                canonical.push_str(&short[..1].to_uppercase());
                canonical.push_str(&short[1..]);
            }
        }
        let text = format!("{canonical} {}-{} {zone_name}", hms(start), hms(end));
        Ok(Window {
            days,
            start,
            end,
            zone,
            zone_name,
            text,
        })
    }

    /// The time zone the window is read in, as given (`UTC` by default).
    pub fn zone_name(&self) -> &str {
        &self.zone_name
    }

    /// Whether work that may take up to `needed` can start at `now`.
    pub fn fit(&self, now: Timestamp, needed: Duration) -> Fit {
        let opens = self.next_opening(now);
        match self.current(now) {
            Some(closes) => {
                let fits = Duration::try_from(closes.timestamp().duration_since(now))
                    .is_ok_and(|left| left >= needed);
                if fits {
                    Fit::Fits { closes }
                } else {
                    Fit::TooLate { closes, opens }
                }
            }
            None => Fit::Closed { opens },
        }
    }

    /// The occurrences that may contain `now` or follow it: those opening
    /// from the day before `now` (one running past midnight) to eight days
    /// after, in order.
    fn occurrences(&self, now: Timestamp) -> impl Iterator<Item = (Zoned, Zoned)> + '_ {
        let today = now.to_zoned_datetime(self.zone.clone()).date();
        (-1i64..=8).filter_map(move |offset| {
            let day = today.checked_add(offset.days()).ok()?;
            if self.days & (1 << day_index(day.weekday())) == 0 {
                return None;
            }
            let end_day = if self.end <= self.start {
                day.tomorrow().ok()?
            } else {
                day
            };
            let open = self.at(day, self.start)?;
            let close = self.at(end_day, self.end)?;
            Some((open, close))
        })
    }

    /// `date` at `time` in the window's zone; a time a DST change skips is
    /// taken as the instant after the gap, as jiff's "compatible" rule does.
    fn at(&self, date: Date, time: Time) -> Option<Zoned> {
        date.to_datetime(time)
            .to_zoned_datetime(self.zone.clone())
            .ok()
    }

    /// When the occurrence containing `now` closes, if one does.
    fn current(&self, now: Timestamp) -> Option<Zoned> {
        self.occurrences(now)
            .find(|(open, close)| open.timestamp() <= now && now < close.timestamp())
            .map(|(_, close)| close)
    }

    /// The next opening strictly after `now`.
    fn next_opening(&self, now: Timestamp) -> Zoned {
        self.occurrences(now)
            .map(|(open, _)| open)
            .find(|open| open.timestamp() > now)
            // Some day is always set, so an opening lies within 8 days.
            .unwrap_or_else(|| now.to_zoned_datetime(self.zone.clone()))
    }
}

fn day_index(day: Weekday) -> u8 {
    // Monday is 0.
    day.to_monday_zero_offset() as u8
}

fn parse_day(name: &str) -> Result<u8, String> {
    let lower = name.to_ascii_lowercase();
    DAY_NAMES
        .iter()
        .position(|names| names.contains(&lower.as_str()))
        .map(|i| i as u8)
        .ok_or_else(|| format!("{name:?} is not a day (mon, tue, … sun)"))
}

fn parse_days(text: &str) -> Result<u8, String> {
    if text == "*" {
        return Ok(0x7f);
    }
    let mut days = 0u8;
    for part in text.split(',') {
        match part.split_once('-') {
            Some((from, to)) => {
                let (from, to) = (parse_day(from)?, parse_day(to)?);
                // mon-fri, or sat-mon across the week's end.
                let mut d = from;
                loop {
                    days |= 1 << d;
                    if d == to {
                        break;
                    }
                    d = (d + 1) % 7;
                }
            }
            None => days |= 1 << parse_day(part)?,
        }
    }
    Ok(days)
}

fn parse_time(text: &str) -> Result<Time, String> {
    let bad = || format!("{text:?} is not a time of day (HH:MM or HH:MM:SS, 24-hour clock)");
    let mut parts = text.split(':');
    let mut field = |max_len: usize| -> Result<Option<i8>, String> {
        match parts.next() {
            None => Ok(None),
            Some(p)
                if p.is_empty() || p.len() > max_len || !p.bytes().all(|b| b.is_ascii_digit()) =>
            {
                Err(bad())
            }
            Some(p) => p.parse().map(Some).map_err(|_| bad()),
        }
    };
    let h = field(2)?.ok_or_else(bad)?;
    let m = field(2)?.ok_or_else(bad)?;
    let sec = field(2)?.unwrap_or(0);
    if parts.next().is_some() {
        return Err(bad());
    }
    Time::new(h, m, sec, 0).map_err(|_| bad())
}

fn hms(t: Time) -> String {
    if t.second() == 0 {
        format!("{:02}:{:02}", t.hour(), t.minute())
    } else {
        format!("{:02}:{:02}:{:02}", t.hour(), t.minute(), t.second())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Berlin's rules as a POSIX TZ string: CET, CEST from the last Sunday
    /// of March to the last Sunday of October.
    fn berlin(text: &str) -> Window {
        Window::parse_with(text, |name| match name {
            "Europe/Berlin" => {
                TimeZone::posix("CET-1CEST,M3.5.0,M10.5.0/3").map_err(|e| e.to_string())
            }
            other => Err(format!("{other} is not in this test's database")),
        })
        .unwrap()
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn minutes(n: u64) -> Duration {
        Duration::from_secs(n * 60)
    }

    #[test]
    fn parses_kureds_day_names_ranges_and_zones() {
        let w = Window::parse("Sat,Sun 01:00-05:00").unwrap();
        assert_eq!(w.to_string(), "Sat,Sun 01:00-05:00 UTC");
        assert_eq!(w.zone_name(), "UTC");
        assert_eq!(
            berlin("mon-fri 22:00-04:00 Europe/Berlin").to_string(),
            "Mon,Tue,Wed,Thu,Fri 22:00-04:00 Europe/Berlin"
        );
        assert_eq!(
            Window::parse("sa-mo 9:30-10:00").unwrap().to_string(),
            "Mon,Sat,Sun 09:30-10:00 UTC"
        );
        assert_eq!(
            Window::parse("fri 12:00:30-12:05").unwrap().to_string(),
            "Fri 12:00:30-12:05 UTC"
        );
        assert_eq!(
            Window::parse("* 00:00-23:59").unwrap().to_string(),
            "Mon,Tue,Wed,Thu,Fri,Sat,Sun 00:00-23:59 UTC"
        );
    }

    #[test]
    fn refuses_what_it_cannot_read_and_says_the_form() {
        for (text, says) in [
            ("Sat 01:00", "expected DAYS START-END"),
            ("Sat 01:00-05:00 UTC extra", "expected DAYS START-END"),
            ("Caturday 01:00-05:00", "\"Caturday\" is not a day"),
            ("Sat 1-5", "is not a time of day"),
            ("Sat 25:00-05:00", "\"25:00\" is not a time of day"),
            ("Sat 01:00:00:00-05:00", "is not a time of day"),
            ("Sat 01:+5-05:00", "is not a time of day"),
            ("Sat 01:00-01:00", "opens and closes at the same time"),
            (
                "Sat 01:00-05:00 Mars/Olympus",
                "unknown time zone \"Mars/Olympus\"",
            ),
            ("Sat 01:00/05:00", "no START-END"),
        ] {
            let err = Window::parse(text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn work_fits_only_if_it_can_finish_before_the_window_closes() {
        // 2026-12-05 is a Saturday.
        let w = Window::parse("Sat,Sun 01:00-05:00").unwrap();
        match w.fit(at("2026-12-05T02:00:00Z"), minutes(60)) {
            Fit::Fits { closes } => assert_eq!(closes.timestamp(), at("2026-12-05T05:00:00Z")),
            other => panic!("{other:?}"),
        }
        match w.fit(at("2026-12-05T04:30:00Z"), minutes(60)) {
            Fit::TooLate { closes, opens } => {
                assert_eq!(closes.timestamp(), at("2026-12-05T05:00:00Z"));
                assert_eq!(opens.timestamp(), at("2026-12-06T01:00:00Z"));
            }
            other => panic!("{other:?}"),
        }
        // Sunday evening: next Saturday.
        match w.fit(at("2026-12-06T18:00:00Z"), minutes(1)) {
            Fit::Closed { opens } => assert_eq!(opens.timestamp(), at("2026-12-12T01:00:00Z")),
            other => panic!("{other:?}"),
        }
        // The instant it closes is outside.
        assert!(matches!(
            w.fit(at("2026-12-05T05:00:00Z"), Duration::ZERO),
            Fit::Closed { .. }
        ));
        assert!(matches!(
            w.fit(at("2026-12-05T01:00:00Z"), minutes(240)),
            Fit::Fits { .. }
        ));
    }

    #[test]
    fn a_window_past_midnight_belongs_to_the_day_it_opens() {
        let w = Window::parse("Sat 22:00-02:00").unwrap();
        // Sunday 01:00 is inside Saturday's window.
        match w.fit(at("2026-12-06T01:00:00Z"), minutes(30)) {
            Fit::Fits { closes } => assert_eq!(closes.timestamp(), at("2026-12-06T02:00:00Z")),
            other => panic!("{other:?}"),
        }
        // Saturday 01:00 is not: Friday is not listed.
        assert!(matches!(
            w.fit(at("2026-12-05T01:00:00Z"), minutes(1)),
            Fit::Closed { .. }
        ));
    }

    #[test]
    fn the_zone_moves_the_window_and_follows_daylight_saving() {
        let w = berlin("Sat 01:00-05:00 Europe/Berlin");
        // Winter: CET is UTC+1, so 01:00 in Berlin is 00:00 UTC.
        match w.fit(at("2026-12-05T00:30:00Z"), minutes(60)) {
            Fit::Fits { closes } => assert_eq!(closes.timestamp(), at("2026-12-05T04:00:00Z")),
            other => panic!("{other:?}"),
        }
        // Summer: CEST is UTC+2.
        match w.fit(at("2026-07-04T00:30:00Z"), minutes(60)) {
            Fit::Fits { closes } => assert_eq!(closes.timestamp(), at("2026-07-04T03:00:00Z")),
            other => panic!("{other:?}"),
        }
    }
}
