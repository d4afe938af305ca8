//! [`AuthorityFix`]: a unix socket connection whose incoming HTTP/2 header blocks carry a
//! valid `:authority`.
//!
//! gRPC clients built on the C core (Python `grpcio`, and Java, Swift, Dart through it)
//! send the socket path as `:authority` on a unix socket, percent-encoded
//! (`tmp%2Fcuzk.sock` for `unix:///tmp/cuzk.sock`; seen with grpcio 1.85.3). That is not a
//! URI authority, and `h2` resets every such stream with PROTOCOL_ERROR before hyper or
//! tonic see the request (h2 0.4 `server.rs`, `convert_poll_message`: "malformed
//! authority"), so no tower layer can repair it. On a unix socket the authority names
//! nothing, so this wrapper sits between the socket and `h2`: it decodes each HEADERS
//! block the client sends (HPACK, RFC 7541, with the client's dynamic table), replaces an
//! invalid `:authority` with `localhost`, and re-encodes the block with literals that are
//! not indexed, so `h2`'s own table stays empty and both tables stay consistent. Every
//! other frame passes through unchanged, and the server's direction is not touched.
//!
//! Anything that is not HTTP/2 with prior knowledge, or a header block that does not
//! decode, is passed through as it came from there on, for `h2` to refuse.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use loona_hpack::Decoder;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::codegen::http::uri::Authority;
use tonic::transport::server::Connected;
use tracing::{debug, info};

/// The client connection preface (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The frame size `h2` accepts before settings say otherwise (RFC 9113 §4.2).
const MAX_FRAME: usize = 16_384;
/// The HPACK table size `h2` advertises (its default), which bounds the client's table.
const HPACK_TABLE: usize = 4_096;
/// A header block larger than this closes the connection: no gRPC call needs it.
const MAX_BLOCK: usize = 1 << 20;
/// What replaces an invalid authority.
const LOCALHOST: &[u8] = b"localhost";

const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// A connection whose incoming header blocks are repaired (see the module docs).
pub struct AuthorityFix<S> {
    inner: S,
    rewriter: Rewriter,
    eof: bool,
}

impl<S> AuthorityFix<S> {
    /// Wraps a freshly accepted connection.
    pub fn new(inner: S) -> Self {
        AuthorityFix {
            inner,
            rewriter: Rewriter::new(),
            eof: false,
        }
    }
}

impl<S: Connected> Connected for AuthorityFix<S> {
    type ConnectInfo = S::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for AuthorityFix<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            if this.rewriter.take_into(buf) || this.eof {
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; 16 * 1024];
            let mut chunk_buf = ReadBuf::new(&mut chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut chunk_buf) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {
                    let filled = chunk_buf.filled();
                    if filled.is_empty() {
                        this.eof = true;
                        this.rewriter.finish();
                    } else {
                        this.rewriter.feed(filled)?;
                    }
                }
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for AuthorityFix<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Where the rewriter is in the client's byte stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Reading the connection preface.
    Preface,
    /// Reading frames.
    Frames,
    /// Passing everything through unchanged.
    Passthrough,
}

/// A header block whose CONTINUATION frames are still to come.
struct PendingBlock {
    stream_id: [u8; 4],
    end_stream: bool,
    priority: Option<[u8; 5]>,
    fragment: Vec<u8>,
    /// The frames as received, in case the block must pass through unchanged.
    raw: Vec<u8>,
}

/// The client-to-server byte stream transform, apart from the I/O.
pub struct Rewriter {
    phase: Phase,
    decoder: Decoder<'static>,
    input: Vec<u8>,
    output: Vec<u8>,
    output_pos: usize,
    pending: Option<PendingBlock>,
    rewritten: u64,
}

impl Default for Rewriter {
    fn default() -> Self {
        Rewriter::new()
    }
}

impl Rewriter {
    /// A rewriter at the start of a connection.
    pub fn new() -> Self {
        let mut decoder = Decoder::new();
        decoder.set_max_allowed_table_size(HPACK_TABLE);
        Rewriter {
            phase: Phase::Preface,
            decoder,
            input: Vec::new(),
            output: Vec::new(),
            output_pos: 0,
            pending: None,
            rewritten: 0,
        }
    }

    /// How many `:authority` values were replaced so far.
    pub fn rewritten(&self) -> u64 {
        self.rewritten
    }

    /// Takes bytes the client sent.
    ///
    /// # Errors
    /// `InvalidData` for a header block over 1 MiB.
    pub fn feed(&mut self, data: &[u8]) -> io::Result<()> {
        if self.phase == Phase::Passthrough {
            self.output.extend_from_slice(data);
            return Ok(());
        }
        self.input.extend_from_slice(data);
        let mut at = 0;
        loop {
            let rest = &self.input[at..];
            match self.phase {
                Phase::Passthrough => {
                    self.output.extend_from_slice(rest);
                    at = self.input.len();
                    break;
                }
                Phase::Preface => {
                    let n = rest.len().min(PREFACE.len());
                    if rest[..n] != PREFACE[..n] {
                        self.phase = Phase::Passthrough;
                        continue;
                    }
                    if n < PREFACE.len() {
                        break;
                    }
                    self.output.extend_from_slice(PREFACE);
                    at += PREFACE.len();
                    self.phase = Phase::Frames;
                }
                Phase::Frames => {
                    if rest.len() < 9 {
                        break;
                    }
                    let len = usize::from(rest[0]) << 16
                        | usize::from(rest[1]) << 8
                        | usize::from(rest[2]);
                    if rest.len() < 9 + len {
                        break;
                    }
                    let frame = rest[..9 + len].to_vec();
                    at += 9 + len;
                    self.frame(&frame)?;
                }
            }
        }
        self.input.drain(..at);
        Ok(())
    }

    /// The client closed its side: what is left passes through.
    pub fn finish(&mut self) {
        if let Some(pending) = self.pending.take() {
            self.output.extend_from_slice(&pending.raw);
        }
        self.output.append(&mut self.input);
    }

    /// Moves rewritten bytes into `buf`; false when there were none.
    fn take_into(&mut self, buf: &mut ReadBuf<'_>) -> bool {
        let ready = &self.output[self.output_pos..];
        if ready.is_empty() {
            return false;
        }
        let n = ready.len().min(buf.remaining());
        buf.put_slice(&ready[..n]);
        self.output_pos += n;
        if self.output_pos == self.output.len() {
            self.output.clear();
            self.output_pos = 0;
        }
        true
    }

    /// One whole frame (header and payload).
    fn frame(&mut self, frame: &[u8]) -> io::Result<()> {
        let kind = frame[3];
        let flags = frame[4];
        let payload = &frame[9..];
        let stream_id = [frame[5], frame[6], frame[7], frame[8]];
        if let Some(pending) = &mut self.pending {
            if kind != CONTINUATION || stream_id != pending.stream_id {
                // A protocol error by the client: let h2 see it as it came.
                self.pass_through_from(frame);
                return Ok(());
            }
            pending.fragment.extend_from_slice(payload);
            pending.raw.extend_from_slice(frame);
            if pending.fragment.len() > MAX_BLOCK {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "http/2 header block over 1 MiB",
                ));
            }
            if flags & END_HEADERS != 0 {
                if let Some(block) = self.pending.take() {
                    self.block(block);
                }
            }
            return Ok(());
        }
        if kind != HEADERS {
            self.output.extend_from_slice(frame);
            return Ok(());
        }
        let mut body = payload;
        if flags & PADDED != 0 {
            let Some((&pad, rest)) = body.split_first() else {
                self.pass_through_from(frame);
                return Ok(());
            };
            if usize::from(pad) > rest.len() {
                self.pass_through_from(frame);
                return Ok(());
            }
            body = &rest[..rest.len() - usize::from(pad)];
        }
        let mut priority = None;
        if flags & PRIORITY != 0 {
            if body.len() < 5 {
                self.pass_through_from(frame);
                return Ok(());
            }
            let mut p = [0u8; 5];
            p.copy_from_slice(&body[..5]);
            priority = Some(p);
            body = &body[5..];
        }
        let block = PendingBlock {
            stream_id,
            end_stream: flags & END_STREAM != 0,
            priority,
            fragment: body.to_vec(),
            raw: frame.to_vec(),
        };
        if flags & END_HEADERS != 0 {
            self.block(block);
        } else {
            self.pending = Some(block);
        }
        Ok(())
    }

    /// Gives up rewriting: `frame` and everything after it pass through unchanged.
    fn pass_through_from(&mut self, frame: &[u8]) {
        if let Some(pending) = self.pending.take() {
            self.output.extend_from_slice(&pending.raw);
        }
        self.output.extend_from_slice(frame);
        self.phase = Phase::Passthrough;
    }

    /// A complete header block: decoded, repaired, re-encoded as HEADERS + CONTINUATION.
    fn block(&mut self, block: PendingBlock) {
        let headers = match self.decoder.decode(&block.fragment) {
            Ok(headers) => headers,
            Err(e) => {
                debug!("http/2 header block does not decode ({e:?}); passing it through");
                self.output.extend_from_slice(&block.raw);
                self.phase = Phase::Passthrough;
                return;
            }
        };
        let mut encoded = Vec::with_capacity(block.fragment.len() * 2);
        for (name, value) in &headers {
            let value: &[u8] = if name == b":authority" && Authority::try_from(&value[..]).is_err()
            {
                self.rewritten += 1;
                if self.rewritten == 1 {
                    info!(
                        authority = %String::from_utf8_lossy(value),
                        "client sent a socket path as :authority (gRPC C core); serving it as localhost"
                    );
                }
                LOCALHOST
            } else {
                value
            };
            // Literal header field without indexing, new name (RFC 7541 §6.2.2), no Huffman.
            encoded.push(0x00);
            encode_string(&mut encoded, name);
            encode_string(&mut encoded, value);
        }
        // The first frame also carries the 5 priority bytes.
        let chunks: Vec<&[u8]> = if encoded.is_empty() {
            vec![&[]]
        } else {
            encoded.chunks(MAX_FRAME - 5).collect()
        };
        for (i, chunk) in chunks.iter().enumerate() {
            let (kind, mut flags, prefix): (u8, u8, &[u8]) = if i == 0 {
                let mut flags = 0;
                if block.end_stream {
                    flags |= END_STREAM;
                }
                if block.priority.is_some() {
                    flags |= PRIORITY;
                }
                (
                    HEADERS,
                    flags,
                    block.priority.as_ref().map_or(&[], |p| &p[..]),
                )
            } else {
                (CONTINUATION, 0, &[])
            };
            if i + 1 == chunks.len() {
                flags |= END_HEADERS;
            }
            let len = prefix.len() + chunk.len();
            self.output.extend_from_slice(&[
                (len >> 16) as u8,
                (len >> 8) as u8,
                len as u8,
                kind,
                flags,
            ]);
            self.output.extend_from_slice(&block.stream_id);
            self.output.extend_from_slice(prefix);
            self.output.extend_from_slice(chunk);
        }
    }
}

/// An HPACK string literal without Huffman coding (RFC 7541 §5.2).
fn encode_string(out: &mut Vec<u8>, s: &[u8]) {
    // Writing into a Vec cannot fail.
    let _ = loona_hpack::encoder::encode_integer_into(s.len(), 7, 0, out);
    out.extend_from_slice(s);
}

#[cfg(test)]
mod tests;
