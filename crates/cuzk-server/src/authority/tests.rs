//! Tests of the authority rewrite: header blocks in, header blocks out.

use super::*;
use loona_hpack::Encoder;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn request(authority: &[u8], extra: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    vec![
        (b":method".to_vec(), b"POST".to_vec()),
        (b":scheme".to_vec(), b"http".to_vec()),
        (
            b":path".to_vec(),
            b"/cuzk.v1.ProvingEngine/GetStatus".to_vec(),
        ),
        (b":authority".to_vec(), authority.to_vec()),
        (b"x-extra".to_vec(), extra.to_vec()),
    ]
}

/// (kind, flags, stream, payload).
type Frame = (u8, u8, u32, Vec<u8>);
/// Decoded (name, value) pairs.
type Block = Vec<(Vec<u8>, Vec<u8>)>;

/// Splits the rewritten stream into frames and decodes every header block.
fn parse(out: &[u8]) -> (Vec<Frame>, Vec<Block>) {
    assert!(out.starts_with(PREFACE));
    let mut rest = &out[PREFACE.len()..];
    let mut frames = Vec::new();
    let mut decoder = Decoder::new();
    let mut blocks = Vec::new();
    let mut block = Vec::new();
    while !rest.is_empty() {
        let len = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
        assert!(len <= MAX_FRAME, "frame of {len} bytes");
        let stream = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]);
        let payload = rest[9..9 + len].to_vec();
        let (kind, flags) = (rest[3], rest[4]);
        if kind == HEADERS || kind == CONTINUATION {
            let skip = if kind == HEADERS && flags & PRIORITY != 0 {
                5
            } else {
                0
            };
            block.extend_from_slice(&payload[skip..]);
            if flags & END_HEADERS != 0 {
                blocks.push(decoder.decode(&block).expect("decodes"));
                block.clear();
            }
        }
        frames.push((kind, flags, stream, payload));
        rest = &rest[9 + len..];
    }
    (frames, blocks)
}

fn authority(block: &[(Vec<u8>, Vec<u8>)]) -> &[u8] {
    &block
        .iter()
        .find(|(n, _)| n == b":authority")
        .expect("authority")
        .1
}

/// A string literal without Huffman coding, short enough for a one-byte length.
fn lit(s: &[u8]) -> Vec<u8> {
    let mut v = vec![s.len() as u8];
    v.extend_from_slice(s);
    v
}

#[test]
fn socket_path_authority_becomes_localhost_across_the_dynamic_table() {
    // As the C core encodes it: the first request adds :path and :authority to the
    // dynamic table (literal with incremental indexing), the second one refers to them
    // by index, so the rewriter must follow the client's table.
    let path = b"/cuzk.v1.ProvingEngine/GetStatus";
    let mut first = vec![0x83, 0x86, 0x44];
    first.extend(lit(path));
    first.push(0x40);
    first.extend(lit(b":authority"));
    first.extend(lit(b"tmp%2Fcuzk.sock"));
    // Dynamic table now: 62 = :authority, 63 = :path.
    let second = vec![0x83, 0x86, 0x80 | 63, 0x80 | 62];
    let mut input = PREFACE.to_vec();
    input.extend(frame(0x4, 0, 0, &[]));
    for (stream, block) in [(1u32, &first), (3, &second)] {
        input.extend(frame(HEADERS, END_HEADERS, stream, block));
        input.extend(frame(0x0, END_STREAM, stream, b"\0\0\0\0\0"));
    }
    let mut rw = Rewriter::new();
    // Byte by byte: frames split anywhere must come out whole.
    for b in &input {
        rw.feed(std::slice::from_ref(b)).expect("feeds");
    }
    let (frames, blocks) = parse(&rw.output);
    assert_eq!(blocks.len(), 2);
    for block in &blocks {
        assert_eq!(authority(block), b"localhost");
        assert_eq!(block.len(), 4);
        assert_eq!(block[2], (b":path".to_vec(), path.to_vec()));
    }
    assert_eq!(rw.rewritten(), 2);
    let data: Vec<_> = frames.iter().filter(|f| f.0 == 0x0).collect();
    assert_eq!(data.len(), 2);
    assert_eq!(data[1].2, 3);
    assert_eq!(data[1].3, b"\0\0\0\0\0");
}

#[test]
fn valid_authority_is_kept_and_big_blocks_split_into_continuations() {
    let mut client = Encoder::new();
    let big = vec![b'a'; 40_000];
    let headers = request(b"localhost", &big);
    let block = client.encode(headers.iter().map(|(n, v)| (&n[..], &v[..])));
    let mut input = PREFACE.to_vec();
    // The client splits it too, and pads and prioritizes its first frame.
    let (first, second) = block.split_at(100);
    let mut padded = vec![3u8];
    padded.extend_from_slice(&[0, 0, 0, 0, 7]);
    padded.extend_from_slice(first);
    padded.extend_from_slice(&[0, 0, 0]);
    input.extend(frame(HEADERS, PADDED | PRIORITY | END_STREAM, 1, &padded));
    for (i, part) in second.chunks(MAX_FRAME).enumerate() {
        let last = (i + 1) * MAX_FRAME >= second.len();
        input.extend(frame(
            CONTINUATION,
            if last { END_HEADERS } else { 0 },
            1,
            part,
        ));
    }
    let mut rw = Rewriter::new();
    rw.feed(&input).expect("feeds");
    let (frames, blocks) = parse(&rw.output);
    assert_eq!(authority(&blocks[0]), b"localhost");
    assert_eq!(blocks[0][4].1, big);
    assert_eq!(rw.rewritten(), 0);
    assert!(frames.len() >= 3, "split into continuations");
    let (kind, flags, _, payload) = &frames[0];
    assert_eq!(
        (*kind, flags & (END_STREAM | PRIORITY | PADDED)),
        (HEADERS, END_STREAM | PRIORITY)
    );
    assert_eq!(&payload[..5], &[0, 0, 0, 0, 7]);
    assert!(frames[1..].iter().all(|f| f.0 == CONTINUATION));
}

#[test]
fn not_http2_or_undecodable_passes_through() {
    let mut rw = Rewriter::new();
    rw.feed(b"GET / HTTP/1.1\r\n\r\n").expect("feeds");
    assert_eq!(rw.output, b"GET / HTTP/1.1\r\n\r\n");

    let mut rw = Rewriter::new();
    let mut input = PREFACE.to_vec();
    // Index 200 is in no table.
    input.extend(frame(HEADERS, END_HEADERS, 1, &[0x80 | 0x7f, 0x49]));
    input.extend(frame(0x0, 0, 1, b"after"));
    rw.feed(&input).expect("feeds");
    assert_eq!(rw.output, input);

    let mut rw = Rewriter::new();
    let mut input = PREFACE.to_vec();
    input.extend(frame(HEADERS, 0, 1, &vec![0u8; MAX_FRAME]));
    for _ in 0..70 {
        input.extend(frame(CONTINUATION, 0, 1, &vec![0u8; MAX_FRAME]));
    }
    assert!(
        rw.feed(&input).is_err(),
        "a header block over 1 MiB closes the connection"
    );
}
