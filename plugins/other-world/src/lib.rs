//! Test fixture: a valid WebAssembly component that targets another world
//! (`test:other/greeter`, exporting `greet`). `hookbox check` and `hookbox run`
//! must refuse it with a reason that names the missing `on-event` export.

#![allow(unsafe_code, missing_docs)]

wit_bindgen::generate!({
    inline: r#"
        package test:other@1.0.0;
        world greeter {
            export greet: func(name: string) -> string;
        }
    "#,
});

struct Greeter;

impl Guest for Greeter {
    fn greet(name: String) -> String {
        format!("hello, {name}")
    }
}

export!(Greeter);
