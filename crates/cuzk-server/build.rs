//! Compiles proto/cuzk.proto with protox (pure Rust, no protoc) and generates the tonic
//! client and server with tonic-prost-build.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/cuzk.proto");
    let fds = protox::compile(["proto/cuzk.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
