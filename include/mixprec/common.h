/*
 * mixprec/common.h - export macro, version macros and the runtime version call.
 *
 * Every other mixprec header includes this one. Nothing here allocates or fails.
 */
#ifndef MIXPREC_COMMON_H
#define MIXPREC_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MXP_VERSION_MAJOR 0
#define MXP_VERSION_MINOR 1
#define MXP_VERSION_PATCH 0
/** Single comparable number: major*10000 + minor*100 + patch. */
#define MXP_VERSION_NUMBER (MXP_VERSION_MAJOR * 10000 + MXP_VERSION_MINOR * 100 + MXP_VERSION_PATCH)
#define MXP_VERSION_STRING "0.1.0"

/* Symbols are hidden by default (-fvisibility=hidden); MXP_API marks the public ones. */
#if defined(_WIN32) && defined(MXP_SHARED_BUILD)
#define MXP_API __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#define MXP_API __attribute__((visibility("default")))
#else
#define MXP_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/**
 * The version of the library actually linked, e.g. "0.1.0" (compare with MXP_VERSION_STRING
 * to detect a header/library mismatch).
 * Thread-safety: safe. The string is static; do not free it.
 */
MXP_API const char *mxp_version(void);

/** The same as a number (MXP_VERSION_NUMBER of the built library). Thread-safety: safe. */
MXP_API int mxp_version_number(void);

#ifdef __cplusplus
}
#endif

#endif /* MIXPREC_COMMON_H */
