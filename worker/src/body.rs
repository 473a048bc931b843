//! Bodies read as they stream, each chunk counted before the next is read
//! ([`ByteCap`]): a body over its cap is never read further, and never held whole.

use crate::js;
use sluicegate::edge::body::{ByteCap, Over};
use sluicegate::time::Instant;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{ReadableStream, Request};

/// What reading up to a cap came to.
pub enum Taken {
    /// The whole body, in its chunks.
    Whole(js_sys::Array),
    /// Over the cap: the chunks read so far (the last one took it over), and the reader,
    /// still open on the rest.
    Over { read: js_sys::Array, reader: JsValue },
    /// `deadline` came before the end: the reader was cancelled.
    Late,
}

/// Read `stream` chunk by chunk while `cap` admits it, until `deadline` if there is one.
///
/// # Errors
/// When the stream fails.
pub async fn take_up_to(
    stream: &ReadableStream,
    cap: &mut ByteCap,
    deadline: Option<Instant>,
) -> Result<Taken, JsValue> {
    let reader = js::reader_of(stream)?;
    let read = js_sys::Array::new();
    loop {
        let next = js::next_chunk(&reader)?;
        let chunk = match deadline {
            None => JsFuture::from(next).await,
            Some(deadline) => {
                let left = crate::clock::timer_ms(deadline.saturating_since(crate::clock::now())).max(1.0);
                JsFuture::from(js::within(&next, left, &JsValue::NULL)?).await
            }
        };
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(error) => {
                js::cancel_reader(&reader);
                return Err(error);
            }
        };
        if chunk.is_null() {
            js::cancel_reader(&reader);
            return Ok(Taken::Late);
        }
        if chunk.is_undefined() {
            return Ok(Taken::Whole(read));
        }
        let Some(bytes) = chunk.dyn_ref::<js_sys::Uint8Array>() else {
            js::cancel_reader(&reader);
            return Err(JsValue::from_str("a body chunk that is not bytes"));
        };
        read.push(bytes);
        if cap.take(bytes.length() as usize).is_err() {
            return Ok(Taken::Over { read, reader });
        }
    }
}

/// The body of `request`, of at most `max` bytes: `Ok(None)` without one, `Err(Over)` (the
/// rest not read) when it declares or brings more.
///
/// # Errors
/// When the body cannot be read.
pub async fn request_body(request: &Request, max: u64) -> Result<Result<Option<js_sys::Uint8Array>, Over>, JsValue> {
    let Some(stream) = request.body() else { return Ok(Ok(None)) };
    let declared = request.headers().get("content-length")?.and_then(|v| v.trim().parse::<u64>().ok());
    let mut cap = match ByteCap::declared(max, declared) {
        Ok(cap) => cap,
        Err(over) => {
            let _ = stream.cancel();
            return Ok(Err(over));
        }
    };
    match take_up_to(&stream, &mut cap, None).await? {
        Taken::Whole(chunks) => Ok(Ok(Some(js::joined(&chunks)?))),
        Taken::Over { reader, .. } => {
            js::cancel_reader(&reader);
            Ok(Err(Over { max }))
        }
        Taken::Late => Ok(Err(Over { max })),
    }
}

/// [`request_body`] as text (lossy UTF-8; empty without a body).
///
/// # Errors
/// When the body cannot be read.
pub async fn request_text(request: &Request, max: u64) -> Result<Result<String, Over>, JsValue> {
    Ok(request_body(request, max)
        .await?
        .map(|body| body.map(|bytes| String::from_utf8_lossy(&bytes.to_vec()).into_owned()).unwrap_or_default()))
}
