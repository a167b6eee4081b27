/* cJSON helpers: parsing with a named source, typed getters, printing. */
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

/* One pass over JSON text, knowing strings and escapes: the offset of the
 * first \u0000 escape inside a string (len when none), or, with `fix`,
 * every such escape rewritten to \ufffd and *n_fixed counting them. */
static size_t nul_scan(char *text, size_t len, bool fix, size_t *n_fixed)
{
	bool in_str = false;
	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		if (!in_str) {
			in_str = c == '"';
		} else if (c == '"') {
			in_str = false;
		} else if (c == '\\') {
			if (i + 5 < len && !memcmp(text + i + 1, "u0000", 5)) {
				if (!fix)
					return i;
				memcpy(text + i, "\\ufffd", 6);
				++*n_fixed;
				i += 5;
				continue;
			}
			i++; /* the escaped character */
		}
	}
	return len;
}

size_t ev_json_find_nul(const char *text, size_t len)
{
	return nul_scan((char *)text, len, false, NULL); /* reads only */
}

size_t ev_json_replace_nul(char *text, size_t len)
{
	size_t n = 0;
	nul_scan(text, len, true, &n);
	return n;
}

/* The next number token in text from *pos (strings skipped): whether it
 * is written as a float. Numbers appear in the text in the same order as
 * in a depth-first walk of the parsed tree. */
static bool next_number_is_float(const char *text, size_t len, size_t *pos)
{
	size_t i = *pos;
	bool in_str = false;
	for (; i < len; i++) {
		char c = text[i];
		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = false;
		} else if (c == '"') {
			in_str = true;
		} else if (c == '-' || (c >= '0' && c <= '9')) {
			break;
		}
	}
	bool flt = false;
	for (; i < len; i++) {
		char c = text[i];
		if (c == '.' || c == 'e' || c == 'E')
			flt = true;
		else if (!(c == '-' || c == '+' || (c >= '0' && c <= '9')))
			break;
	}
	*pos = i;
	return flt;
}

static void mark_float_forms(cJSON *item, const char *text, size_t len, size_t *pos)
{
	for (; item; item = item->next) {
		if (cJSON_IsNumber(item)) {
			if (next_number_is_float(text, len, pos))
				item->type |= EV_JSON_FLOAT_FORM;
		} else if (item->child) {
			mark_float_forms(item->child, text, len, pos);
		}
	}
}

int ev_json_parse(cJSON **out, const char *text, size_t len, const char *what)
{
	*out = NULL;
	size_t nul = ev_json_find_nul(text, len);
	if (nul < len)
		return ev_error_set(EV_E_PARSE, "%s: a string holds \\u0000 (NUL) at byte %zu; text with NUL is not accepted",
		                    what, nul);
	const char *end = NULL;
	*out = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	if (*out) {
		/* One document: only whitespace may follow the value. */
		size_t rest = (size_t)(end - text);
		while (rest < len && (text[rest] == ' ' || text[rest] == '\t' || text[rest] == '\r' || text[rest] == '\n'))
			rest++;
		if (rest == len) {
			size_t pos = 0;
			mark_float_forms(*out, text, len, &pos);
			return 0;
		}
		cJSON_Delete(*out);
		*out = NULL;
		return ev_error_set(EV_E_PARSE, "%s: malformed JSON near byte %zu", what, rest);
	}
	size_t off = end && end >= text ? (size_t)(end - text) : 0;
	/* cJSON says nothing of why: tell a nesting past its limit from
	 * malformed text (brackets counted outside strings, up to where it
	 * stopped) */
	size_t depth = 0, max_depth = 0;
	bool in_str = false;
	for (size_t i = 0; i < len && i <= off; i++) {
		char c = text[i];
		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = false;
		} else if (c == '"') {
			in_str = true;
		} else if (c == '[' || c == '{') {
			if (++depth > max_depth)
				max_depth = depth;
		} else if ((c == ']' || c == '}') && depth) {
			depth--;
		}
	}
	if (max_depth > CJSON_NESTING_LIMIT)
		return ev_error_set(EV_E_LIMIT, "%s: nested deeper than %d levels near byte %zu", what, CJSON_NESTING_LIMIT,
		                    off);
	return ev_error_set(EV_E_PARSE, "%s: malformed JSON near byte %zu", what, off);
}

const char *ev_json_str(const cJSON *obj, const char *key, const char *dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsString(v) ? v->valuestring : dflt;
}

double ev_json_num(const cJSON *obj, const char *key, double dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

bool ev_json_bool(const cJSON *obj, const char *key, bool dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

int ev_json_str_req(const char **out, const cJSON *obj, const char *key, const char *what)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!v)
		return ev_error_set(EV_E_INVALID, "%s: %s: missing", what, key);
	if (!cJSON_IsString(v))
		return ev_error_set(EV_E_INVALID, "%s: %s: expected a string", what, key);
	*out = v->valuestring;
	return 0;
}

static int print_number(ev_buf *b, const cJSON *item)
{
	double d = item->valuedouble;
	if (d != d || d - d != 0) /* NaN and infinities are not JSON */
		return ev_buf_puts(b, "null");
	char num[40];
	if (d == (double)(long long)d && d > -9.007199254740992e15 && d < 9.007199254740992e15) {
		snprintf(num, sizeof num, (item->type & EV_JSON_FLOAT_FORM) ? "%.1f" : "%.0f", d);
	} else {
		snprintf(num, sizeof num, "%.15g", d);
		if (strtod(num, NULL) != d)
			snprintf(num, sizeof num, "%.17g", d);
		if ((item->type & EV_JSON_FLOAT_FORM) && !strpbrk(num, ".eEn"))
			strcat(num, ".0");
	}
	return ev_buf_puts(b, num);
}

static int print_value(ev_buf *b, const cJSON *item)
{
	switch (item->type & 0xFF) {
	case cJSON_NULL: return ev_buf_puts(b, "null");
	case cJSON_False: return ev_buf_puts(b, "false");
	case cJSON_True: return ev_buf_puts(b, "true");
	case cJSON_Number: return print_number(b, item);
	case cJSON_String: return ev_json_buf_str(b, item->valuestring ? item->valuestring : "");
	case cJSON_Raw: return ev_buf_puts(b, item->valuestring ? item->valuestring : "null");
	case cJSON_Array:
	case cJSON_Object: {
		bool obj = (item->type & 0xFF) == cJSON_Object;
		int rc = ev_buf_putc(b, obj ? '{' : '[');
		for (const cJSON *c = item->child; !rc && c; c = c->next) {
			if (c != item->child)
				rc = ev_buf_putc(b, ',');
			if (!rc && obj) {
				rc = ev_json_buf_str(b, c->string ? c->string : "");
				if (!rc)
					rc = ev_buf_putc(b, ':');
			}
			if (!rc)
				rc = print_value(b, c);
		}
		return rc ? rc : ev_buf_putc(b, obj ? '}' : ']');
	}
	default: return ev_buf_puts(b, "null");
	}
}

char *ev_json_print(const cJSON *item)
{
	if (!item)
		return NULL;
	ev_buf b = EV_BUF_INIT(SIZE_MAX / 2);
	if (print_value(&b, item)) {
		ev_buf_free(&b);
		return NULL;
	}
	return ev_buf_detach(&b, NULL);
}

size_t ev_json_term_clean(cJSON *item)
{
	/* Depth is bounded by the parser's nesting limit; siblings iterate. */
	size_t n = 0;
	for (; item; item = item->next) {
		if (item->string && !(item->type & cJSON_StringIsConst))
			n += ev_term_clean(item->string);
		if (cJSON_IsString(item) && !(item->type & cJSON_IsReference))
			n += ev_term_clean(item->valuestring);
		if (item->child)
			n += ev_json_term_clean(item->child);
	}
	return n;
}

int ev_json_buf_strn(ev_buf *b, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	int rc = ev_buf_putc(b, '"');
	for (size_t k = 0; !rc && k < len; k++) {
		unsigned char c = (unsigned char)s[k];
		switch (c) {
		case '"': rc = ev_buf_puts(b, "\\\""); break;
		case '\\': rc = ev_buf_puts(b, "\\\\"); break;
		case '\n': rc = ev_buf_puts(b, "\\n"); break;
		case '\r': rc = ev_buf_puts(b, "\\r"); break;
		case '\t': rc = ev_buf_puts(b, "\\t"); break;
		default:
			if (c < 0x20) {
				char esc[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0};
				rc = ev_buf_puts(b, esc);
			} else {
				rc = ev_buf_putc(b, (char)c);
			}
		}
	}
	return rc ? rc : ev_buf_putc(b, '"');
}

int ev_json_buf_str(ev_buf *b, const char *s) { return ev_json_buf_strn(b, s, strlen(s)); }
