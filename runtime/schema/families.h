// Registration hooks of the schema families, one per file of runtime/schema;
// schema.cpp calls each once, on first use (the library is static, so a file
// that registered itself through a static initializer could be dropped).
#pragma once

#include "runtime/schema/schema.h"

namespace pcc {

void registerCollectiveSchemas(SchemaRegistry& r);
void registerConvPoolSchemas(SchemaRegistry& r);
void registerDataMovementSchemas(SchemaRegistry& r);
void registerElementwiseSchemas(SchemaRegistry& r);
void registerLinalgSchemas(SchemaRegistry& r);
void registerMathActivationSchemas(SchemaRegistry& r);
void registerMathBinarySchemas(SchemaRegistry& r);
void registerMathGenerateSchemas(SchemaRegistry& r);
void registerMathQuantSchemas(SchemaRegistry& r);
void registerMathUnarySchemas(SchemaRegistry& r);
void registerNormReduceSchemas(SchemaRegistry& r);
void registerAttentionSchemas(SchemaRegistry& r);
void registerEinsumSchemas(SchemaRegistry& r);
void registerNormalizationSchemas(SchemaRegistry& r);
void registerReductionSchemas(SchemaRegistry& r);
void registerSelectionSchemas(SchemaRegistry& r);
void registerRnnSchemas(SchemaRegistry& r);
void registerShapeSchemas(SchemaRegistry& r);
void registerLossSchemas(SchemaRegistry& r);
void registerSpectralSchemas(SchemaRegistry& r);
void registerWindowSchemas(SchemaRegistry& r);
void registerTensorIndexSchemas(SchemaRegistry& r);
void registerTensorLayoutSchemas(SchemaRegistry& r);
void registerTensorResizeSchemas(SchemaRegistry& r);
void registerTextSchemas(SchemaRegistry& r);
void registerVisionQuantSchemas(SchemaRegistry& r);
void registerVisionSampleSchemas(SchemaRegistry& r);
void registerVisionSelectSchemas(SchemaRegistry& r);

}  // namespace pcc
