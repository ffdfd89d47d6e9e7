// What a template's image is made of, engine-free: the gateway hashes recipes with it, and the Dockerfile a recipe
// makes can be printed (scripts/template-dockerfile.ts) to build the image elsewhere.
export * from './template-image.ts';
export * from './template-dockerfile.ts';
