use super::*;

fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
}

#[test]
fn schemes_round_trip() {
    for api in Api::ALL {
        assert_eq!(Api::from_scheme(api.scheme()), Some(api));
    }
    assert_eq!(Api::from_scheme("replay"), None);
}

#[test]
fn missing_key_names_the_variable() {
    for api in Api::ALL {
        let err = HttpProvider::with_env(api, "m", HttpOptions::default(), &env(&[])).unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with(&format!("{} is not set", api.key_env())), "{msg}");
        assert!(msg.contains(api.scheme()), "{msg}");
        // An empty variable is missing too.
        let err = HttpProvider::with_env(api, "m", HttpOptions::default(), &|n| {
            (n == api.key_env()).then(|| "  ".to_owned())
        })
        .unwrap_err();
        assert!(matches!(err, HttpConfigError::MissingApiKey { .. }), "{err}");
    }
}

#[test]
fn base_url_option_beats_environment_beats_default() {
    let keys: &[(&str, &str)] = &[("ANTHROPIC_API_KEY", "k"), ("OPENAI_API_KEY", "k"), ("GEMINI_API_KEY", "k")];
    let with_urls: &[(&str, &str)] = &[
        ("ANTHROPIC_API_KEY", "k"),
        ("OPENAI_API_KEY", "k"),
        ("GEMINI_API_KEY", "k"),
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/anthropic/"),
        ("OPENAI_BASE_URL", "http://localhost:11434/v1"),
        ("GEMINI_BASE_URL", "https://gateway.example/gemini"),
    ];
    let p = |api, opts: HttpOptions, e: &'static [(&'static str, &'static str)]| {
        HttpProvider::with_env(api, "m-1", opts, &env(e)).unwrap()
    };
    assert_eq!(p(Api::Anthropic, HttpOptions::default(), keys).endpoint(), "https://api.anthropic.com/v1/messages");
    assert_eq!(p(Api::OpenAi, HttpOptions::default(), keys).endpoint(), "https://api.openai.com/v1/chat/completions");
    assert_eq!(p(Api::OpenAiResponses, HttpOptions::default(), keys).endpoint(), "https://api.openai.com/v1/responses");
    assert_eq!(
        p(Api::Gemini, HttpOptions::default(), keys).endpoint(),
        "https://generativelanguage.googleapis.com/v1beta/models/m-1:streamGenerateContent?alt=sse"
    );
    let no_stream = HttpOptions { stream: false, ..HttpOptions::default() };
    assert_eq!(
        p(Api::Gemini, no_stream, keys).endpoint(),
        "https://generativelanguage.googleapis.com/v1beta/models/m-1:generateContent"
    );
    assert_eq!(
        p(Api::Anthropic, HttpOptions::default(), with_urls).endpoint(),
        "http://127.0.0.1:9/anthropic/v1/messages"
    );
    assert_eq!(p(Api::OpenAi, HttpOptions::default(), with_urls).base_url(), "http://localhost:11434/v1");
    assert_eq!(p(Api::Gemini, HttpOptions::default(), with_urls).base_url(), "https://gateway.example/gemini");
    let explicit = HttpOptions { base_url: Some("http://10.1.2.3:8000/v1/".into()), ..HttpOptions::default() };
    assert_eq!(p(Api::OpenAi, explicit, with_urls).endpoint(), "http://10.1.2.3:8000/v1/chat/completions");

    let bad = HttpOptions { base_url: Some("ftp://x".into()), ..HttpOptions::default() };
    let err = HttpProvider::with_env(Api::OpenAi, "m", bad, &env(keys)).unwrap_err();
    assert!(err.to_string().contains("expected http or https"), "{err}");
    let bad = HttpOptions { base_url: Some("not a url".into()), ..HttpOptions::default() };
    assert!(matches!(
        HttpProvider::with_env(Api::OpenAi, "m", bad, &env(keys)),
        Err(HttpConfigError::BadBaseUrl { .. })
    ));
}

#[test]
fn streaming_request_bodies() {
    let keys: &[(&str, &str)] = &[("ANTHROPIC_API_KEY", "k"), ("OPENAI_API_KEY", "k"), ("GEMINI_API_KEY", "k")];
    let req = ModelRequest {
        model: "m".into(),
        system: None,
        messages: vec![crate::model::Message::User { content: "hi".into() }],
        tools: vec![],
    };
    let body = |api, stream| {
        let opts = HttpOptions { stream, ..HttpOptions::default() };
        HttpProvider::with_env(api, "m", opts, &env(keys)).unwrap().request_body(&req).unwrap()
    };
    assert_eq!(body(Api::OpenAi, true)["stream_options"], json!({"include_usage": true}));
    assert_eq!(body(Api::OpenAi, true)["stream"], json!(true));
    assert_eq!(body(Api::OpenAi, false)["stream"], json!(false));
    assert!(body(Api::OpenAi, false).get("stream_options").is_none());
    assert_eq!(body(Api::Anthropic, true)["stream"], json!(true));
    assert_eq!(body(Api::OpenAiResponses, true)["stream"], json!(true));
    assert!(body(Api::Gemini, true).get("stream").is_none());
}

#[test]
fn retry_after_headers_and_body_cut() {
    let mut h = HeaderMap::new();
    h.insert("retry-after", HeaderValue::from_static("7"));
    assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
    h.insert("retry-after-ms", HeaderValue::from_static("250"));
    assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
    assert_eq!(retry_after(&HeaderMap::new()), None);
    assert_eq!(cut("héllo", 2), "h…");
    assert_eq!(cut("héllo", 3), "hé…");
    assert_eq!(cut("ok", 2), "ok");
}
