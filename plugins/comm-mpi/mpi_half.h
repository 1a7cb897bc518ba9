/* f16 and bf16 for comm.mpi: MPI has no half types, so the 2-byte values travel as
 * MPI_UINT16_T (gathers, broadcasts, point to point are plain copies) and the reductions
 * are user operations (MPI_Op_create) that widen to f32, combine, and round back to
 * nearest even, once per pairwise combine. */
#ifndef FULGUR_COMM_MPI_HALF_H
#define FULGUR_COMM_MPI_HALF_H

#include "mpi_comm.h"

/* 1 for FG_F16 and FG_BF16. */
int fg_mpi_is_half(uint32_t dtype);
/* The MPI_Op of a reduction over dtype: the half user operations for FG_F16/FG_BF16
 * (created on first use), else fg_mpi_reduce_op. */
fg_status fg_mpi_reduce_op_for(uint32_t op, uint32_t dtype, const char *what, MPI_Op *out,
                               fg_error *err);
/* x[i] /= size in f32, rounded back to the half type (an AVG reduction). */
void fg_mpi_half_scale_average(void *buf, size_t count, uint32_t dtype, int size);
/* Frees the user operations; before MPI_Finalize (comm.mpi's deinit). */
void fg_mpi_half_release(void);

/* The conversions (round to nearest even; NaN stays NaN, overflow goes to inf). */
float fg_mpi_f16_to_f32(uint16_t h);
uint16_t fg_mpi_f32_to_f16(float f);
float fg_mpi_bf16_to_f32(uint16_t b);
uint16_t fg_mpi_f32_to_bf16(float f);

#endif
