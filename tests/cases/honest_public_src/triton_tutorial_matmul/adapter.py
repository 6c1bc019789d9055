def kernel(a, b):
    # The tutorial writes fp16 (its kernel rounds the fp32 accumulator to fp16); the problem
    # asks for bf16, so the result is converted (outputs are O(1): no fp16 overflow).
    return matmul(a, b).to(torch.bfloat16)
