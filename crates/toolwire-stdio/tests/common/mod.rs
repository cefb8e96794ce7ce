//! Helpers shared by the stdio tests of each platform.

use std::time::Duration;

use toolwire_stdio::StdioTransport;
use toolwire_transport::Transport;

/// The next message's text, within 20 s.
pub(crate) async fn recv_text(t: &StdioTransport) -> String {
    let inbound = tokio::time::timeout(Duration::from_secs(20), t.recv())
        .await
        .expect("recv timed out");
    String::from_utf8(inbound.expect("closed").expect("error").body.to_vec()).expect("UTF-8")
}
