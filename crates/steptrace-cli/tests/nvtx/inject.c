/*
 * A stand-in for Nsight in the tests: an NVTX injection library (what `nsys` loads through
 * NVTX_INJECTION64_PATH) that writes every range started or ended in any domain to the file
 * STEPTRACE_NVTX_LOG names, one line each:
 *   start <TAB> domain <TAB> message <TAB> payload (or -) <TAB> range id
 *   end <TAB> range id
 * The types and numbers are NVTX 3's injection ABI (nvtxDetail/nvtxTypes.h, nvToolsExt.h):
 * export table 1 (callbacks), module 5 (CORE2), slots 2 (DomainRangeStartEx),
 * 3 (DomainRangeEnd), 10 and 11 (DomainRegisterStringA and W), 12 and 13 (DomainCreateA and W).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

typedef void (*function_t)(void);
typedef function_t **table_t;
typedef struct {
    size_t struct_size;
    int (*get_module_function_table)(int module, table_t *table, unsigned int *size);
} callbacks_t;
typedef const void *(*get_export_table_t)(uint32_t id);

typedef struct {
    uint16_t version;
    uint16_t size;
    uint32_t category;
    int32_t color_type;
    uint32_t color;
    int32_t payload_type;
    int32_t reserved0;
    union {
        uint64_t u64;
        int64_t i64;
        double f64;
    } payload;
    int32_t message_type;
    union {
        const char *ascii;
        const void *other;
    } message;
} attributes_t;

enum { MESSAGE_ASCII = 1, MESSAGE_REGISTERED = 3, PAYLOAD_U64 = 1 };
enum {
    CALLBACKS = 1,
    CORE2 = 5,
    RANGE_START = 2,
    RANGE_END = 3,
    REGISTER_STRING = 10,
    REGISTER_STRING_W = 11,
    DOMAIN_CREATE = 12,
    DOMAIN_CREATE_W = 13
};

static FILE *out;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t next_id = 1;

/* A domain and a registered string are both their own text: the handle is a copy of it. */
static void *domain_create(const char *name) { return strdup(name ? name : "?"); }
static void *register_string(void *domain, const char *text) {
    (void)domain;
    return strdup(text ? text : "?");
}

/* Wide strings (the Unicode variants) are kept as their ASCII characters, '?' for others. */
static char *narrow(const wchar_t *text) {
    size_t n = text ? wcslen(text) : 0;
    char *out = malloc(n + 1);
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) out[i] = (text[i] > 0 && text[i] < 128) ? (char)text[i] : '?';
    out[n] = 0;
    return out;
}
static void *domain_create_w(const wchar_t *name) { return narrow(name); }
static void *register_string_w(void *domain, const wchar_t *text) {
    (void)domain;
    return narrow(text);
}

static const char *message_of(const attributes_t *a) {
    static char unknown[64];
    if (!a) return "?";
    if (a->message_type == MESSAGE_ASCII && a->message.ascii) return a->message.ascii;
    if (a->message_type == MESSAGE_REGISTERED && a->message.other) return (const char *)a->message.other;
    snprintf(unknown, sizeof unknown, "?type=%d,size=%u,version=%u", a->message_type, a->size, a->version);
    return unknown;
}

static uint64_t range_start(void *domain, const attributes_t *a) {
    pthread_mutex_lock(&lock);
    uint64_t id = next_id++;
    fprintf(out, "start\t%s\t%s\t", domain ? (const char *)domain : "(default)", message_of(a));
    if (a && a->payload_type == PAYLOAD_U64) {
        fprintf(out, "%llu", (unsigned long long)a->payload.u64);
    } else {
        fputc('-', out);
    }
    fprintf(out, "\t%llu\n", (unsigned long long)id);
    fflush(out);
    pthread_mutex_unlock(&lock);
    return id;
}

static void range_end(void *domain, uint64_t id) {
    (void)domain;
    pthread_mutex_lock(&lock);
    fprintf(out, "end\t%llu\n", (unsigned long long)id);
    fflush(out);
    pthread_mutex_unlock(&lock);
}

int InitializeInjectionNvtx2(get_export_table_t get_export_table) {
    const char *path = getenv("STEPTRACE_NVTX_LOG");
    if (!path || !(out = fopen(path, "w"))) return 0;
    const callbacks_t *callbacks = (const callbacks_t *)get_export_table(CALLBACKS);
    table_t table = 0;
    unsigned int size = 0;
    if (!callbacks || !callbacks->get_module_function_table(CORE2, &table, &size) || !table || size <= DOMAIN_CREATE_W) {
        return 0;
    }
    *table[RANGE_START] = (function_t)range_start;
    *table[RANGE_END] = (function_t)range_end;
    *table[REGISTER_STRING] = (function_t)register_string;
    *table[DOMAIN_CREATE] = (function_t)domain_create;
    *table[REGISTER_STRING_W] = (function_t)register_string_w;
    *table[DOMAIN_CREATE_W] = (function_t)domain_create_w;
    return 1;
}
