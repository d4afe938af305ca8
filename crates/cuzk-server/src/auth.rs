//! [`BearerAuth`]: the check that every `cuzk.v1.ProvingEngine` call carries the configured
//! token as `authorization: Bearer <token>` metadata. The health service is not behind it:
//! load balancers probe without credentials, and it tells nothing but "serving or not".

use std::sync::Arc;

use tonic::metadata::MetadataValue;
use tonic::service::Interceptor;
use tonic::{Request, Status};

/// The metadata key of the token.
pub const AUTHORIZATION: &str = "authorization";

/// Checks the bearer token of each call; with no token configured, passes every call.
#[derive(Clone)]
pub struct BearerAuth {
    expected: Option<Arc<str>>,
}

impl BearerAuth {
    /// Requires `token` when it is `Some`.
    pub fn new(token: Option<String>) -> Self {
        BearerAuth {
            expected: token.map(Arc::from),
        }
    }
}

impl Interceptor for BearerAuth {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let Some(expected) = &self.expected else {
            return Ok(request);
        };
        let presented = request
            .metadata()
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        match presented {
            Some(token) if same(token.as_bytes(), expected.as_bytes()) => Ok(request),
            Some(_) => Err(Status::unauthenticated("invalid bearer token")),
            None => Err(Status::unauthenticated(
                "missing bearer token: send metadata \"authorization: Bearer <token>\"",
            )),
        }
    }
}

/// Adds `authorization: Bearer <token>` to a request.
///
/// # Errors
/// INVALID_ARGUMENT when the token is not printable ASCII.
pub fn authorize<T>(request: &mut Request<T>, token: &str) -> Result<(), Status> {
    let value = MetadataValue::try_from(format!("Bearer {token}"))
        .map_err(|_| Status::invalid_argument("invalid token: not printable ASCII"))?;
    request.metadata_mut().insert(AUTHORIZATION, value);
    Ok(())
}

/// A request carrying `token` when there is one.
///
/// # Errors
/// INVALID_ARGUMENT when the token is not printable ASCII.
pub fn request<T>(message: T, token: Option<&str>) -> Result<Request<T>, Status> {
    let mut request = Request::new(message);
    if let Some(token) = token {
        authorize(&mut request, token)?;
    }
    Ok(request)
}

/// Compares in time independent of where the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(token: Option<&str>, header: Option<&str>) -> Result<(), tonic::Code> {
        let mut req = Request::new(());
        if let Some(h) = header {
            req.metadata_mut()
                .insert(AUTHORIZATION, MetadataValue::try_from(h).unwrap());
        }
        BearerAuth::new(token.map(String::from))
            .call(req)
            .map(|_| ())
            .map_err(|s| s.code())
    }

    #[test]
    fn token_is_required_exactly() {
        use tonic::Code::Unauthenticated as U;
        assert_eq!(check(None, None), Ok(()));
        assert_eq!(check(Some("s3cret"), None), Err(U));
        assert_eq!(check(Some("s3cret"), Some("Bearer s3cre")), Err(U));
        assert_eq!(check(Some("s3cret"), Some("Bearer s3cret2")), Err(U));
        assert_eq!(check(Some("s3cret"), Some("Basic s3cret")), Err(U));
        assert_eq!(check(Some("s3cret"), Some("Bearer s3cret")), Ok(()));
    }
}
