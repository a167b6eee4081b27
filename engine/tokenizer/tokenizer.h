/*
 * engine/tokenizer: byte-level BPE from a Hugging Face tokenizer.json, the
 * streaming detokenizer, and the chat template families (ChatML, Llama-3)
 * with tool definitions and tool-call parsing.
 *
 * Everything returns 0 or a negative EV_E_* status with the per-thread
 * message set (base/); *_free accepts NULL. A loaded tokenizer is
 * read-only apart from an internal, locked word cache: one tokenizer may be
 * shared by many threads.
 */
#ifndef ENG_TOKENIZER_H
#define ENG_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* ---- limits ------------------------------------------------------------ */

#define ENG_TOK_MAX_FILE ((size_t)64 << 20)   /* tokenizer.json bytes */
#define ENG_TOK_MAX_CONFIG ((size_t)4 << 20)  /* tokenizer_config.json bytes */
#define ENG_TOK_MAX_VOCAB 1000000             /* vocab entries (and ids) */
#define ENG_TOK_MAX_MERGES 2000000
#define ENG_TOK_MAX_TOKEN_BYTES 1024          /* one vocab / added token */
#define ENG_TOK_MAX_INPUT ((size_t)256 << 20) /* bytes of one eng_tokenize input */
#define ENG_CHAT_MAX_PROMPT ((size_t)256 << 20) /* rendered prompt bytes */

/* ---- tokenizer ---------------------------------------------------------- */

typedef struct eng_tokenizer eng_tokenizer;

/* Loads `dir_or_file`: a folder holding tokenizer.json (and, optionally,
 * tokenizer_config.json for the BOS/EOS tokens) or the path of a
 * tokenizer.json itself. Supported: model.type BPE (byte-level, merges as
 * "a b" strings or ["a","b"] pairs, ignore_merges), added_tokens,
 * pre_tokenizer ByteLevel or Sequence of Split + ByteLevel, normalizer null
 * (NFC is accepted and not applied: see README). Errors name the file and
 * the field ("tokenizer.json: model.merges[12]: unknown token \"xy\""). */
int eng_tokenizer_load(eng_tokenizer **out, const char *dir_or_file);
/* The same from tokenizer.json text in memory; `what` names it in errors. */
int eng_tokenizer_load_json(eng_tokenizer **out, const char *json, size_t len, const char *what);
void eng_tokenizer_free(eng_tokenizer *tok);

/* Encodes `len` bytes of `text` (any bytes; invalid UTF-8 is encoded byte by
 * byte) into a malloc'd array *ids of *n ids (free with free(); never NULL
 * on success, even for empty input). Added tokens are split out first,
 * longest first; special ones only when `allow_special` (otherwise their
 * text is encoded as ordinary text); the text between them goes through
 * the normalizer (NFC, NFKC, NFD, NFKD or a Sequence of them; text that is
 * not valid UTF-8 is left as is). No BOS/EOS is added (HF's
 * add_special_tokens=False, what chat templates are tokenized with): see
 * eng_tokenizer_affixes. Inputs over ENG_TOK_MAX_INPUT fail with
 * EV_E_LIMIT. */
int eng_tokenize(const eng_tokenizer *tok, const char *text, size_t len, bool allow_special,
		 int32_t **ids, size_t *n);
/* The ids tokenizer.json's post-processor puts around one sequence
 * (TemplateProcessing's "single", Roberta/BertProcessing's cls and sep;
 * none for ByteLevel or no post-processor): HF's add_special_tokens=True,
 * e.g. Llama-3's <|begin_of_text|> before and nothing after; Qwen's
 * nothing at all. Borrowed. */
void eng_tokenizer_affixes(const eng_tokenizer *tok, const int32_t **pre, size_t *n_pre, const int32_t **suf,
			   size_t *n_suf);
/* eng_tokenize with the post-processor's ids around the result. */
int eng_tokenize_with_specials(const eng_tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *n);

/* Decodes ids into malloc'd bytes *out (NUL-terminated, *out_len bytes not
 * counting the NUL; out_len may be NULL): vocab tokens through the inverse
 * ByteLevel map, added tokens verbatim, special ones left out when
 * `skip_special`. An id outside the vocab fails with EV_E_INVALID. The
 * result is exactly the encoded input as normalized: decode(encode(x)) ==
 * x for text the normalizer leaves alone (all of it without a normalizer). */
int eng_detokenize(const eng_tokenizer *tok, const int32_t *ids, size_t n, bool skip_special,
		   char **out, size_t *out_len);

/* The id of a token by its vocab text ("<|im_end|>", "Ġthe") or by its raw
 * bytes (" the"); -1 when there is none. */
int32_t eng_token_id(const eng_tokenizer *tok, const char *token);
/* The decoded bytes of one id (borrowed, *len bytes, not NUL-terminated);
 * NULL for an id outside the vocab or a hole in it. */
const char *eng_token_bytes(const eng_tokenizer *tok, int32_t id, size_t *len);
bool eng_token_is_special(const eng_tokenizer *tok, int32_t id);
/* Appends the token as the vocab writes it (HF's convert_ids_to_tokens:
 * byte-level text such as "Ġca" or "Ã©" for vocab tokens, added tokens as
 * they are). EV_E_INVALID for an id outside the vocab. */
int eng_token_piece(const eng_tokenizer *tok, int32_t id, ev_buf *out);
/* Highest id + 1, added tokens included. */
size_t eng_tokenizer_vocab_size(const eng_tokenizer *tok);
/* From tokenizer_config.json beside tokenizer.json; -1 when unknown. */
int32_t eng_tokenizer_bos_id(const eng_tokenizer *tok);
int32_t eng_tokenizer_eos_id(const eng_tokenizer *tok);

/* ---- streaming detokenizer -------------------------------------------- */

/* Turns ids into text one at a time, as they are generated. Bytes of a
 * UTF-8 sequence split across tokens are held back until the sequence is
 * complete; bytes that can never form valid UTF-8 come out as U+FFFD, so
 * the output is always valid UTF-8. For valid text, the concatenation of
 * everything pushed and flushed equals eng_detokenize of all the ids. */
typedef struct eng_detok_stream eng_detok_stream;

/* `tok` is borrowed and must outlive the stream. */
int eng_detok_stream_new(eng_detok_stream **out, const eng_tokenizer *tok, bool skip_special);
/* Appends the text that became complete with `id` to `out` (maybe none). */
int eng_detok_stream_push(eng_detok_stream *s, int32_t id, ev_buf *out);
/* Appends whatever is still held (an incomplete sequence as U+FFFD). */
int eng_detok_stream_flush(eng_detok_stream *s, ev_buf *out);
void eng_detok_stream_free(eng_detok_stream *s);

/* Writes a small but real byte-level BPE tokenizer into folder `dir`
 * (which must exist): tokenizer.json with the 256 byte tokens (id = byte
 * value), merges learned deterministically from a built-in English text,
 * then the family's special tokens, and the family's Split pre-tokenizer
 * (GPT-2 style for chatml, Llama-3 style for llama3); and
 * tokenizer_config.json with the family's chat_template and bos/eos
 * tokens. `family` is "chatml" or "llama3". Merges are learned until the
 * vocab reaches `vocab_size` minus the specials or the text has no pair
 * left to merge (about 1,000 merges); past that, filler tokens (a known
 * token plus one letter, each with its merge) make the vocab exactly
 * `vocab_size`, so every id of a model of that size decodes. The specials
 * take the last ids. vocab_size must be within [256 + specials, 65536]. */
int eng_tokenizer_write_default(const char *dir, int vocab_size, const char *family);
/* The same with up to 8 more special tokens after the family's (the last
 * ids of the vocabulary, in order). With "</think>" among them the chat
 * template thinks: it opens a <think> block at the generation prompt (as
 * DeepSeek-R1's) and closes it at once when enable_thinking is false. */
int eng_tokenizer_write_default_ex(const char *dir, int vocab_size, const char *family, const char *const *extra,
				   size_t nextra);

/* ---- chat templates ------------------------------------------------------ */

typedef enum {
	ENG_CHAT_UNKNOWN = 0,
	ENG_CHAT_CHATML = 1, /* <|im_start|>role\n...<|im_end|>\n (Qwen style tools) */
	ENG_CHAT_LLAMA3 = 2  /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
} eng_chat_family;

/* "chatml" / "llama3" (NULL for UNKNOWN); and back (UNKNOWN if neither). */
const char *eng_chat_family_name(eng_chat_family f);
eng_chat_family eng_chat_family_from_name(const char *name);
/* Recognises the family of a chat_template string by its marker tokens. */
eng_chat_family eng_chat_family_from_template(const char *chat_template);
/* Reads `config_or_dir` (tokenizer_config.json, or a folder holding it or
 * chat_template.jinja) and recognises its chat_template. A config without a
 * recognisable template gives ENG_CHAT_UNKNOWN and status 0; an unreadable
 * or malformed file is an error. */
int eng_chat_family_detect(eng_chat_family *out, const char *config_or_dir);

/* One message, borrowed strings (any may be NULL but role).
 * role: "system", "user", "assistant" or "tool".
 * tool_calls_json: assistant messages: the OpenAI tool_calls array
 *   ([{"id":..,"type":"function","function":{"name":..,"arguments":..}}],
 *   arguments a JSON string or an object; [{"name":..,"arguments":..}]
 *   is accepted too).
 * tool_call_id, name: tool messages (the call answered, the function). */
typedef struct {
	const char *role;
	const char *content;
	const char *tool_calls_json;
	const char *tool_call_id;
	const char *name;
} eng_chat_msg;

/* Renders messages (and, when tools_json is an OpenAI tools array
 * [{"type":"function","function":{"name","description","parameters"}}],
 * the tool definitions) into the prompt text of `family`, ending with the
 * assistant header when `add_generation_prompt`. *out is malloc'd
 * (NUL-terminated, *out_len bytes; out_len may be NULL). Tokenize it with
 * allow_special = true. Bad roles or malformed tool JSON fail with
 * EV_E_INVALID naming the message index. */
int eng_chat_render(char **out, size_t *out_len, eng_chat_family family, const eng_chat_msg *msgs,
		    size_t n_msgs, const char *tools_json, bool add_generation_prompt);

/* One tool call found in generated text. */
typedef struct {
	char *name;      /* NULL when the call could not be parsed */
	char *arguments; /* compact JSON object text ("{}" when absent); NULL on error */
	char *error;     /* NULL, or why this call is malformed */
} eng_tool_call;

typedef struct {
	char *content;         /* the text outside the calls, trimmed; never NULL */
	eng_tool_call *calls;
	size_t n_calls;
	size_t n_errors;       /* calls with error set */
} eng_chat_parsed;

/* Extracts tool calls from a model's generated text. ChatML: every
 * <tool_call>{"name":..,"arguments":..}</tool_call> (an unterminated last
 * one too); Llama-3: text that is, after an optional <|python_tag|>, one or
 * more JSON objects {"name":..,"parameters"|"arguments":..} separated by
 * ';' or whitespace. A call whose JSON is malformed is kept with `error`
 * set; it never fails the whole parse. Returns EV_E_INVALID only for bad
 * arguments. Free with eng_chat_parsed_free. */
int eng_chat_parse_tool_calls(eng_chat_parsed **out, eng_chat_family family, const char *text,
			      size_t len);
void eng_chat_parsed_free(eng_chat_parsed *p);

/* The ids that end an assistant turn in `family` (ChatML: <|im_end|>,
 * <|endoftext|>; Llama-3: <|eot_id|>, <|eom_id|>, <|end_of_text|>), those
 * present in the vocab, at most `max`; returns how many were written. */
size_t eng_chat_stop_ids(const eng_tokenizer *tok, eng_chat_family family, int32_t *ids, size_t max);

#endif
