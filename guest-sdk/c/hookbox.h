/*
 * hookbox.h: helpers for Hookbox hooks written in C (compile hookbox.c and
 * hookbox_json.c with your hook).
 *
 * A C hook writes a handler and exports it with HB_EXPORT_ON_EVENT:
 *
 *     static void on_event(const hook_event_t *event, const hb_event_context *context, hook_directive_t *ret) {
 *         ...   // ret is `continue` on entry
 *     }
 *     HB_EXPORT_ON_EVENT(on_event)
 *
 * The macro defines the export that wit-bindgen's C generator declares in
 * hook.h (generated from wit/hook.wit, world `hook`), whose signature
 * depends on the contract version: hookbox:hooks@0.2.0 has
 *
 *     void exports_hook_on_event(hook_event_t *event, hook_event_context_t *context, hook_directive_t *ret);
 *
 * and 0.1.0 the same without `context`. The export sets `ret` to continue,
 * calls the handler, then frees the event and the context (the callee owns
 * them) and flushes stdio. In a build from the frozen 0.1.0 WIT
 * (wit/frozen/hookbox-hooks@0.1.0) `context` is NULL, the 0.2.0 directive
 * helpers are unavailable (a compile error naming the version), and
 * HOOKBOX_WIT_0_1_0 is defined: hookbox.h detects the version from hook.h,
 * and a build may define HOOKBOX_WIT_0_1_0 itself (checked against hook.h).
 * HB_WIT_VERSION is "0.2.0" or "0.1.0". One can still implement
 * exports_hook_on_event by hand: then free the event (hook_event_free) and,
 * with 0.2.0, the context (hook_event_context_free) yourself.
 *
 * Every string put in `ret` must be heap-allocated, because the generated
 * post-return function frees it (the hb_* directive helpers below copy for
 * you). WIT strings (hook_string_t) are UTF-8 bytes with no NUL: compare
 * them with hb_str_eq, copy them with hb_cstr. The events' records are
 * hook.h's structs (0.2.0 adds `cost_estimated`, `arguments` and
 * `result_data` to tool-call-result, `tool_calls` and `reasoning` to
 * final-answer).
 *
 * These helpers need no WASI. hookbox.c also resolves the few WASI calls of
 * libc's stdio itself (see hb_flush_stdio): printf to stdout or stderr goes
 * to the host log, and a hook that opens no files builds into a component
 * that imports nothing but the hook world. The state imports (get-state,
 * set-state) are the generated hookbox_hooks_host_get_state/_set_state.
 * See README.md, "Write a hook in C".
 */
#ifndef HOOKBOX_H
#define HOOKBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hook.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the contract version: 0.2.0's hook.h has the ask-approval directive ---- */

#ifdef HOOKBOX_HOOKS_TYPES_DIRECTIVE_ASK_APPROVAL
#ifdef HOOKBOX_WIT_0_1_0
#error "HOOKBOX_WIT_0_1_0 is defined, but hook.h was generated from hookbox:hooks@0.2.0"
#endif
#define HB_WIT_VERSION "0.2.0"
/* Where an event happens: run_id, session_id (hook_string_t), turn, iteration, max_iterations, retries. */
typedef hook_event_context_t hb_event_context;
#else
#ifndef HOOKBOX_WIT_0_1_0
#define HOOKBOX_WIT_0_1_0 1
#endif
#define HB_WIT_VERSION "0.1.0"
/* 0.2.0's event context, so that code reading it compiles in a 0.1.0 build too; never set (always NULL). */
typedef struct hb_event_context {
    hook_string_t run_id;
    hook_string_t session_id;
    uint32_t turn;
    uint32_t iteration;
    uint32_t max_iterations;
    uint32_t retries;
} hb_event_context;
#endif

/* ---- the export ---- */

/* A hook's handler: `ret` is `continue` on entry; `context` is NULL in a 0.1.0 build. */
typedef void (*hb_handler)(const hook_event_t *event, const hb_event_context *context, hook_directive_t *ret);

/* What HB_EXPORT_ON_EVENT's export runs: the handler, then the frees and hb_flush_stdio. */
void hb_run_handler(hb_handler handler, hook_event_t *event, hb_event_context *context, hook_directive_t *ret);

/* Defines exports_hook_on_event, with the signature of the contract version, to call `handler`. */
#ifdef HOOKBOX_WIT_0_1_0
#define HB_EXPORT_ON_EVENT(handler) \
    void exports_hook_on_event(hook_event_t *event, hook_directive_t *ret) { \
        hb_run_handler(handler, event, NULL, ret); \
    }
#else
#define HB_EXPORT_ON_EVENT(handler) \
    void exports_hook_on_event(hook_event_t *event, hook_event_context_t *context, hook_directive_t *ret) { \
        hb_run_handler(handler, event, context, ret); \
    }
#endif

/* ---- strings ---- */

/* True when `s` holds exactly the bytes of the NUL-terminated `lit`. */
bool hb_str_eq(const hook_string_t *s, const char *lit);
/* A malloc'd, NUL-terminated copy of `s` (free it). */
char *hb_cstr(const hook_string_t *s);

/* ---- journaled random (the host's `random` import: a replay gets the same
 * draws; seed 003's "random, uniform, choice and shuffle") ---- */

/* A random number in [0, n) without modulo bias (0 when n is 0). */
uint64_t hb_random_below(uint64_t n);
/* A random double in [0, 1) with 53 random bits. */
double hb_random_unit(void);
/* A random double between a and b. */
double hb_uniform(double a, double b);
/* A random index into an array of `count` elements (choice); 0 when count is 0. */
size_t hb_choice(size_t count);
/* Shuffles `count` elements of `size` bytes at `items` in place (Fisher-Yates). */
void hb_shuffle(void *items, size_t count, size_t size);

/* ---- log (the host's `log` import; hook_logs in the run record) ---- */

/* Logs a printf-style message at `level` (HOOKBOX_HOOKS_HOST_LOG_LEVEL_*). */
void hb_log(hookbox_hooks_host_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define hb_info(...) hb_log(HOOKBOX_HOOKS_HOST_LOG_LEVEL_INFO, __VA_ARGS__)
#define hb_warn(...) hb_log(HOOKBOX_HOOKS_HOST_LOG_LEVEL_WARN, __VA_ARGS__)
#define hb_error(...) hb_log(HOOKBOX_HOOKS_HOST_LOG_LEVEL_ERROR, __VA_ARGS__)

/* Logs the message at error level and traps (the host records a `trap` failure). */
_Noreturn void hb_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- config (strings as they are, other values as JSON text) ---- */

/* The raw value of `key` as a malloc'd string, or NULL when unset. */
char *hb_config_get(const char *key);
/* Every key, sorted: fills `keys` (free with hb_strlist_free). */
typedef struct {
    char **items;
    size_t len;
} hb_strlist;
void hb_config_keys(hb_strlist *keys);
void hb_strlist_free(hb_strlist *list);
/*
 * Reads a config value as a list of strings, as the Rust SDK does: a JSON
 * array of strings, else the one string itself, or nothing for an empty or
 * blank value. Returns false (with a malloc'd message in *err) for a JSON
 * array holding anything but strings.
 */
bool hb_parse_string_list(const char *raw, hb_strlist *out, char **err);

/* ---- JSON (tool arguments, config values) ---- */

typedef enum { HB_JSON_NULL, HB_JSON_BOOL, HB_JSON_NUMBER, HB_JSON_STRING, HB_JSON_ARRAY, HB_JSON_OBJECT } hb_json_kind;

typedef struct hb_json {
    hb_json_kind kind;
    bool boolean;
    double number;
    char *string;         /* HB_JSON_STRING: UTF-8, NUL-terminated (an embedded \u0000 ends it early) */
    size_t string_len;    /* its length in bytes */
    struct hb_json *items; /* HB_JSON_ARRAY: the elements; HB_JSON_OBJECT: the values */
    char **keys;          /* HB_JSON_OBJECT: the keys, parallel to items */
    size_t len;           /* elements or members */
} hb_json;

/* Parses `len` bytes of strict JSON (RFC 8259); NULL with a malloc'd *err on failure. */
hb_json *hb_json_parse(const char *text, size_t len, char **err);
void hb_json_free(hb_json *value);
/* The member `key` of an object (the last one if repeated), or NULL. */
const hb_json *hb_json_get(const hb_json *object, const char *key);
/* A tool call's arguments: blank text reads as `{}`. */
hb_json *hb_args(const hookbox_hooks_types_tool_call_t *call, char **err);

/* ---- directives (each copies its strings) ---- */

void hb_continue(hook_directive_t *ret);
/* `skip-tool`; message NULL: the host's default text. */
void hb_skip_tool(hook_directive_t *ret, const char *message);
void hb_replace_arguments(hook_directive_t *ret, const char *json_object);
void hb_replace_result(hook_directive_t *ret, const char *text);
void hb_inject(hook_directive_t *ret, const char *text);
void hb_pause(hook_directive_t *ret);
/* `abort`; reason NULL: none. */
void hb_abort(hook_directive_t *ret, const char *reason);

/* The 0.2.0 directives: a compile error in a 0.1.0 build. */
#if !defined(HOOKBOX_WIT_0_1_0)
#define HB_NEEDS_0_2_0
#elif defined(__clang__)
#define HB_NEEDS_0_2_0 __attribute__((unavailable("needs hookbox:hooks@0.2.0; this hook is built against 0.1.0")))
#else
#define HB_NEEDS_0_2_0 __attribute__((error("needs hookbox:hooks@0.2.0; this hook is built against 0.1.0")))
#endif
/* `ask-approval` (before-tool-call): park the call until the host approves, denies or rewrites it. */
void hb_ask_approval(hook_directive_t *ret, const char *reason) HB_NEEDS_0_2_0;
/* `skip-model-call` (iteration-start): end the turn without calling the model; the reason is recorded. */
void hb_skip_model_call(hook_directive_t *ret, const char *reason) HB_NEEDS_0_2_0;
/* `post-message` (any event): send `text` to the session `to` through the host's bus. */
void hb_post_message(hook_directive_t *ret, const char *to, const char *text) HB_NEEDS_0_2_0;

/* ---- globs: the Rust glob crate's (0.3) syntax, `*`/`?`/`[...]` never match `/` ---- */

typedef struct hb_glob hb_glob;
/* Compiles `pattern`; NULL with a malloc'd *err ("Pattern syntax error near position N: ...") if invalid. */
hb_glob *hb_glob_new(const char *pattern, char **err);
bool hb_glob_matches(const hb_glob *glob, const char *text);
void hb_glob_free(hb_glob *glob);

/* Sends what stdout and stderr hold to the host log (a partial last line too); call it before returning. */
void hb_flush_stdio(void);

/* A malloc'd printf. */
char *hb_format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Internal to hookbox.c and hookbox_json.c, not part of the API: malloc and
 * strndup that trap when memory runs out (the host reports a `memory` failure). */
void *hb__xmalloc(size_t n);
char *hb__xstrndup(const char *s, size_t n);

#ifdef __cplusplus
}
#endif

#endif
