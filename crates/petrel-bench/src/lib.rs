//! Petrel's benchmarks: load generators, measurement, JSON results and reports.
