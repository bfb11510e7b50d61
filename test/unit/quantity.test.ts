import { describe, expect, it } from "vitest";
import { cpuMillicores, isNonNegativeQuantity, isQuantity, memoryBytes, parseQuantity, quantityValue } from "../../runtime/core/quantity";

// The grammar: https://github.com/kubernetes/apimachinery/blob/master/pkg/api/resource/quantity.go
describe("Kubernetes quantities (runtime/core/quantity.ts)", () => {
  it.each<[string, number, number]>([
    // text, cpu millicores, memory bytes (both rounded up like upstream's MilliValue / Value)
    ["0", 0, 0],
    ["1", 1000, 1],
    ["+2", 2000, 2],
    ["100m", 100, 1],
    ["7500m", 7500, 8],
    ["0.1", 100, 1],
    ["1.5", 1500, 2],
    ["1.", 1000, 1],
    [".5", 500, 1],
    ["1.1", 1100, 2],
    ["0.0001", 1, 1],
    ["1u", 1, 1],
    ["1n", 1, 1],
    ["250000u", 250, 1],
    ["1k", 1_000_000, 1000],
    ["1Ki", 1_024_000, 1024],
    ["128Mi", 128 * 2 ** 20 * 1000, 128 * 2 ** 20],
    ["1.5Gi", 1.5 * 2 ** 30 * 1000, 1.5 * 2 ** 30],
    ["4Gi", 4 * 2 ** 30 * 1000, 4 * 2 ** 30],
    ["1G", 1e12, 1e9],
    ["2T", 2e15, 2e12],
    ["1P", 1e18, 1e15],
    ["1E", 1e21, 1e18],
    ["1Ei", 2 ** 60 * 1000, 2 ** 60],
    ["1e3", 1_000_000, 1000],
    ["1E3", 1_000_000, 1000],
    ["12e-3", 12, 1],
    ["5e+2", 500_000, 500],
    ["-1", -1000, -1],
    ["-100m", -100, -1],
  ])("%s -> %d millicores, %d bytes", (text, millicores, bytes) => {
    expect(isQuantity(text)).toBe(true);
    expect(cpuMillicores(text)).toBe(millicores);
    expect(memoryBytes(text)).toBe(bytes);
  });

  it.each(["", ".", "lots", "1 Gi", "5GB", "1KI", "1ki", "1Mb", "1e", "1e1.5", "1.2.3", "--1", "+-1", "0x10", "1mi", "Gi", "1e3m"])("refuses %j", (text) => {
    expect(isQuantity(text)).toBe(false);
    expect(parseQuantity(text)).toBeUndefined();
    expect(cpuMillicores(text)).toBeUndefined();
    expect(memoryBytes(text)).toBeUndefined();
    expect(quantityValue(text)).toBeNaN();
  });

  it("accepts no surrounding whitespace (like resource.ParseQuantity)", () => {
    for (const text of [" 1", "1 ", "\t100m"]) {
      expect(isQuantity(text)).toBe(false);
      expect(cpuMillicores(text)).toBeUndefined();
    }
  });

  it("tells a resource request (no minus sign) from a signed quantity", () => {
    expect(isNonNegativeQuantity("100m")).toBe(true);
    expect(isNonNegativeQuantity("+1")).toBe(true);
    expect(isNonNegativeQuantity("-1")).toBe(false);
    expect(isNonNegativeQuantity("lots")).toBe(false);
  });

  it("parses exactly: digits, power of ten, power of two", () => {
    expect(parseQuantity("1.5Gi")).toEqual({ negative: false, digits: 15n, pow10: -1, pow2: 30 });
    expect(parseQuantity("-12e-3")).toEqual({ negative: true, digits: 12n, pow10: -3, pow2: 0 });
  });

  it("gives base units as a float for comparing shapes, ignoring surrounding whitespace", () => {
    expect(quantityValue("100m")).toBe(0.1);
    expect(quantityValue(" 1Gi ")).toBe(2 ** 30);
    expect(quantityValue("1e3")).toBe(1000);
  });

  it("does not build a huge number for a huge exponent", () => {
    expect(cpuMillicores("1e999999")).toBe(Infinity);
    expect(memoryBytes("1e-999999")).toBe(1);
  });
});
