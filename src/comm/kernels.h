/* Launchers of the comm kernels (kernels.cu). Each returns a cudaError_t
 * value (0 = launched). Pointers may live on a peer device once peer access
 * is enabled: that is how the SM-driven NVLink copies work. */
#ifndef TC_COMM_KERNELS_H
#define TC_COMM_KERNELS_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
struct CUstream_st;

#define TC_K_MAX_DIMS 25
typedef struct tc_copy_item {
  const char *src;
  char *dst;
  uint64_t bytes;
} tc_copy_item;

/* Element-wise copy between two layouts of one shape (strides in
 * elements); elem is 1, 2, 4, 8 or 16 bytes. */
typedef struct tc_strided_desc {
  char *dst;
  const char *src;
  int ndim;
  int elem;
  int64_t numel;
  int64_t shape[TC_K_MAX_DIMS];
  int64_t dst_strides[TC_K_MAX_DIMS];
  int64_t src_strides[TC_K_MAX_DIMS];
} tc_strided_desc;

/* Element kinds the sum kernel knows. Complex sums use the real kind on
 * twice the elements; bool sums are logical or, as PyTorch's bool add. */
enum {
  TC_K_I8, TC_K_U8, TC_K_I16, TC_K_U16, TC_K_I32, TC_K_U32, TC_K_I64, TC_K_U64,
  TC_K_F16, TC_K_BF16, TC_K_F32, TC_K_F64, TC_K_BOOL, TC_K_NKINDS
};

/* Each launcher takes blocks, the cap on its grid of 512-thread blocks. */

/* Same-misaligned dst and src get a byte head, then 16-byte moves. */
int tc_k_copy(struct CUstream_st *s, void *dst, const void *src, size_t bytes, int blocks);
/* items: device-accessible array of n copies, the largest max_bytes long. */
int tc_k_multicopy(struct CUstream_st *s, const tc_copy_item *items, size_t n, uint64_t max_bytes, int blocks);
int tc_k_strided(struct CUstream_st *s, const tc_strided_desc *d, int blocks);
/* out[i] = a[i] + b[i] for n elements, rounded to the element type each
 * time (PyTorch's add). out may alias a. */
int tc_k_add(struct CUstream_st *s, int kind, void *out, const void *a, const void *b, size_t n, int blocks);
#ifdef __cplusplus
}
#endif
#endif
