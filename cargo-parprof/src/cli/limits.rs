//! Flag values checked against the limits the collector and the runtime enforce, so that a
//! value they would refuse, clamp or ignore is refused at the command line with its range,
//! instead of being changed silently or blamed on the program later.

use crate::record::collect::MAX_FREQUENCY_HZ;

/// `--period`: a positive duration with a unit (`ns`, `us` or `µs`, `ms`, `s`), in ns.
pub(super) fn parse_duration_ns(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("`{text}` has no unit: write e.g. `500us` or `2ms`"))?;
    let (number, unit) = text.split_at(split);
    let scale = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        other => return Err(format!("unknown unit `{other}`: use ns, us, ms or s")),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{number}` is not a number"))?;
    let ns = (value * scale).round();
    if !(1.0..=u64::MAX as f64).contains(&ns) {
        return Err(format!(
            "`{text}` is not a positive duration of at least 1 ns"
        ));
    }
    Ok(ns as u64)
}

/// The finest utilization period: the cpu samples come at most every 10 µs
/// ([`MAX_FREQUENCY_HZ`]), and periods finer than that show the scheduler's time slices, not
/// the program's parallelism.
pub const MIN_UTILIZATION_PERIOD_NS: u64 = 1_000_000_000 / MAX_FREQUENCY_HZ;

/// `--frequency`: 1 Hz to the collector's cap (0 would record no cpu sample at all).
pub(super) fn sampling_frequency(text: &str) -> Result<u64, String> {
    let hz: u64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a whole number of Hz"))?;
    match hz {
        0 => Err(format!(
            "0 Hz would record no cpu samples (no cpu or off-CPU flamegraph): give 1 to \
             {MAX_FREQUENCY_HZ} Hz"
        )),
        hz if hz > MAX_FREQUENCY_HZ => Err(format!(
            "{hz} Hz is above the cap of {MAX_FREQUENCY_HZ} Hz (a sample every 10 µs per thread; \
             more would make the samples' interrupts a large share of the program's time)"
        )),
        hz => Ok(hz),
    }
}

/// `--repeat`: at least one run.
pub(super) fn run_count(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("0 runs would record nothing: give 1 or more".to_owned()),
        Ok(runs) => Ok(runs),
        Err(_) => Err(format!("`{text}` is not a whole number of runs")),
    }
}

/// `--load-threshold`: the runtime's range, a finite number above 0 (at 0 no slice would
/// ever be forked, since the load is never below it).
pub(super) fn load_threshold(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(load) if load.is_finite() && load > 0.0 => Ok(load),
        Ok(_) => Err(
            "expected a finite number above 0 (running program threads ÷ usable CPUs, e.g. 0.5 \
             or 1): at 0 no slice would ever be forked"
                .to_owned(),
        ),
        Err(_) => Err(format!("`{text}` is not a number")),
    }
}

/// `--period`: a duration (see [`parse_duration_ns`]) of at least
/// [`MIN_UTILIZATION_PERIOD_NS`].
pub(super) fn utilization_period(text: &str) -> Result<u64, String> {
    let ns = parse_duration_ns(text)?;
    if ns < MIN_UTILIZATION_PERIOD_NS {
        return Err(format!(
            "`{text}` is below {}us, the finest period the cpu samples (at most {MAX_FREQUENCY_HZ} \
             Hz) can fill: give e.g. `100us` or `1ms`",
            MIN_UTILIZATION_PERIOD_NS / 1_000
        ));
    }
    Ok(ns)
}

#[cfg(test)]
mod tests {
    use super::super::{Invocation, parse, parse_invocation};
    use super::*;

    fn refused(flags: &[&str]) -> String {
        let args = ["cargo", "parprof"].iter().chain(flags);
        parse(args).expect_err("refused").to_string()
    }

    #[test]
    fn frequency_is_refused_outside_one_hz_to_the_cap() {
        assert!(refused(&["--frequency", "0"]).contains("no cpu samples"));
        let above = refused(&["--frequency", "100001"]);
        assert!(above.contains("cap of 100000 Hz"), "{above}");
        assert!(
            sampling_frequency("-5")
                .unwrap_err()
                .contains("not a whole number")
        );
        assert_eq!(sampling_frequency("1"), Ok(1));
        assert_eq!(sampling_frequency("100000"), Ok(MAX_FREQUENCY_HZ));
        let args = parse(["cargo", "parprof", "--frequency", "4000"]).unwrap();
        assert_eq!(args.recording.collect_options().frequency_hz, 4000);
    }

    #[test]
    fn repeat_needs_one_run_or_more() {
        assert!(refused(&["--repeat", "0"]).contains("record nothing"));
        assert_eq!(run_count("3"), Ok(3));
        let Ok(Invocation::Record(rec)) =
            parse_invocation(["cargo-parprof", "record", "--repeat", "2", "--", "./x"])
        else {
            panic!("not a record invocation");
        };
        assert_eq!(rec.recording.repeat, 2);
        assert!(
            parse_invocation(["cargo-parprof", "record", "--repeat", "0", "--", "./x"]).is_err()
        );
    }

    #[test]
    fn load_threshold_takes_the_runtimes_range() {
        let zero = refused(&["--slices", "--load-threshold", "0"]);
        assert!(zero.contains("above 0"), "{zero}");
        for bad in ["-1", "inf", "NaN"] {
            assert!(load_threshold(bad).is_err(), "{bad}");
        }
        assert_eq!(load_threshold("0.25"), Ok(0.25));
        let args = parse(["cargo", "parprof", "--slices", "--load-threshold", "0.5"]).unwrap();
        let env = args.recording.slices.env();
        assert!(env[0].1.to_string_lossy().contains("load=0.5"), "{env:?}");
    }

    #[test]
    fn period_below_the_sampling_resolution_is_refused() {
        let tiny = refused(&["--period", "1ns"]);
        assert!(tiny.contains("below 10us"), "{tiny}");
        assert!(utilization_period("9us").is_err());
        assert_eq!(utilization_period("10us"), Ok(10_000));
        let report = parse_invocation(["cargo", "parprof", "report", "run", "--period", "1us"]);
        assert!(report.unwrap_err().to_string().contains("below 10us"));
    }
}
