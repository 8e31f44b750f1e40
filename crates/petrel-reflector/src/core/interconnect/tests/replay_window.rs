use super::*;

#[test]
fn window_rules() {
    let mut w = ReplayWindow::new();
    assert_eq!(w.check_and_record(0), Err(Replay::ZeroId));
    assert_eq!(w.check_and_record(10), Ok(()));
    assert_eq!(w.check_and_record(10), Err(Replay::Duplicate));
    assert_eq!(w.check_and_record(3), Ok(()));
    assert_eq!(w.check_and_record(3), Err(Replay::Duplicate));
    assert_eq!(w.check_and_record(4105), Ok(()));
    // 4105 − 10 = 4095: still inside, and seen.
    assert_eq!(w.check_and_record(10), Err(Replay::Duplicate));
    // 4105 − 9 = 4096: too old.
    assert_eq!(w.check_and_record(9), Err(Replay::TooOld));
    assert_eq!(w.check_and_record(11), Ok(()));
    assert_eq!(w.max(), 4105);
}

#[test]
fn sliding_clears_the_bits_passed_over() {
    let mut w = ReplayWindow::new();
    for id in 1..=4096 {
        assert_eq!(w.check_and_record(id), Ok(()));
    }
    // 4097 reuses the bit of 1, 8192 that of 4096.
    assert_eq!(w.check_and_record(8192), Ok(()));
    assert_eq!(w.check_and_record(4097), Ok(()));
    assert_eq!(w.check_and_record(4096), Err(Replay::TooOld));
    assert_eq!(w.check_and_record(5000), Ok(()));
    // A jump of more than the window clears everything.
    assert_eq!(w.check_and_record(100_000), Ok(()));
    assert_eq!(w.check_and_record(100_000 - 4095), Ok(()));
    assert_eq!(w.check_and_record(u64::MAX), Ok(()));
    assert_eq!(w.check_and_record(u64::MAX), Err(Replay::Duplicate));
}
