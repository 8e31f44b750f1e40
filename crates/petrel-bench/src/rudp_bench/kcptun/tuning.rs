//! kcptun's flags chosen to match Petrel's ARQ settings, and the command lines
//! they make.
//!
//! kcptun's `--mode manual` takes kcp-go's `SetNoDelay(nodelay, interval, resend,
//! nc)` values one by one, so Petrel's [`KcpConfig`] maps onto it field by field:
//! `nodelay` (which also sets kcp-go's 30 ms RTO floor, Petrel's
//! `NODELAY_MIN_RTO`), `interval`, `fast_resend`, no congestion window, immediate
//! acks, MTU and windows. Petrel's defaults (nodelay, 10 ms, resend 2, nc, MTU
//! 1200, windows 128/512) are kcptun's `fast3` plus `--acknodelay` and those
//! windows. Encryption and compression are off, as in Petrel's RUDP.

use petrel::KcpConfig;
use petrel_proto::cc::CongestionKind;

use crate::record::rudp::{FecShape, KcptunTuning};

/// kcptun's smux version (`--smuxver`; 1 is its default and what the interop
/// tests use).
const SMUX_VERSION: u8 = 1;

impl KcptunTuning {
    /// The flags matching Petrel's `kcp`, with FEC `shape` (`None`: FEC off),
    /// `conn` KCP sessions and `sockbuf`-byte UDP socket buffers.
    pub fn matching(kcp: &KcpConfig, shape: Option<FecShape>, conn: usize, sockbuf: usize) -> Self {
        let interval_ms = u64::try_from(kcp.interval.as_millis()).unwrap_or(u64::MAX);
        Self {
            crypt: "none".to_owned(),
            compression: false,
            mode: "manual".to_owned(),
            nodelay: kcp.nodelay,
            interval_ms,
            resend: kcp.fast_resend,
            no_congestion_window: kcp.congestion == CongestionKind::None
                && kcp.controller.is_none(),
            ack_nodelay: kcp.ack_nodelay,
            mtu: kcp.mtu,
            snd_wnd: kcp.snd_wnd,
            rcv_wnd: kcp.rcv_wnd,
            data_shards: shape.map_or(0, |s| s.data_shards),
            parity_shards: shape.map_or(0, |s| s.parity_shards),
            conn,
            smux_version: SMUX_VERSION,
            sockbuf,
        }
    }

    /// The flags both processes take (everything but `--conn`, which only
    /// `kcptun-client` has).
    pub fn common_args(&self) -> Vec<String> {
        let flag = |b: bool| if b { "1" } else { "0" };
        let mut args: Vec<String> = [
            "--crypt",
            &self.crypt,
            "--mode",
            &self.mode,
            "--nodelay",
            flag(self.nodelay),
            "--interval",
            &self.interval_ms.to_string(),
            "--resend",
            &self.resend.to_string(),
            "--nc",
            flag(self.no_congestion_window),
            "--mtu",
            &self.mtu.to_string(),
            "--sndwnd",
            &self.snd_wnd.to_string(),
            "--rcvwnd",
            &self.rcv_wnd.to_string(),
            "--datashard",
            &self.data_shards.to_string(),
            "--parityshard",
            &self.parity_shards.to_string(),
            "--smuxver",
            &self.smux_version.to_string(),
            "--sockbuf",
            &self.sockbuf.to_string(),
            "--quiet",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        if !self.compression {
            args.push("--nocomp".to_owned());
        }
        if self.ack_nodelay {
            args.push("--acknodelay".to_owned());
        }
        args
    }

    /// One line for the console: the flags that shape the results, but FEC,
    /// which the case name gives.
    pub fn summary(&self) -> String {
        format!(
            "crypt {}, compression {}, mode {} (nodelay {} interval {} ms resend {} nc {}), acknodelay {}, mtu {}, sndwnd {} rcvwnd {}, conn {}, smux v{}, sockbuf {} B",
            self.crypt,
            if self.compression { "on" } else { "off" },
            self.mode,
            u8::from(self.nodelay),
            self.interval_ms,
            self.resend,
            u8::from(self.no_congestion_window),
            self.ack_nodelay,
            self.mtu,
            self.snd_wnd,
            self.rcv_wnd,
            self.conn,
            self.smux_version,
            self.sockbuf,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use petrel::KcpPreset;

    #[test]
    fn petrel_defaults_are_fast3_with_immediate_acks() {
        let kcp = KcpConfig::default();
        assert_eq!(kcp, KcpConfig::default().with_preset(KcpPreset::Fast3));
        let t = KcptunTuning::matching(&kcp, Some(FecShape::DEFAULT), 4, 1 << 22);
        let args = t.common_args().join(" ");
        for want in [
            "--crypt none",
            "--mode manual --nodelay 1 --interval 10 --resend 2 --nc 1",
            "--mtu 1200 --sndwnd 128 --rcvwnd 512",
            "--datashard 8 --parityshard 2",
            "--nocomp",
            "--acknodelay",
        ] {
            assert!(args.contains(want), "{want} not in {args}");
        }
        let off = KcptunTuning::matching(&kcp, None, 4, 1 << 22);
        assert_eq!((off.data_shards, off.parity_shards), (0, 0));
    }
}
