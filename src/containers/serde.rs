//! `Serialize` / `Deserialize` for `Vector`, `Matrix` and `Tensor3` (feature `serde`): a
//! vector as the sequence of its elements, a matrix as `{ rows, cols, data }` and a tensor
//! as `{ d0, d1, d2, data }` with `data` in row-major order, so any serde format (JSON,
//! bincode, ...) stores shape and data. Serializing reads the host data (brought back from
//! a device first); deserializing checks the shape.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Matrix, Tensor3, Vector};
use crate::userfn::DeviceType;

impl<T: DeviceType + Serialize> Serialize for Vector<T> {
    /// The elements as a sequence (`[1.0, 2.0]` in JSON).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v = Vector::from(vec![1.5f32, 2.0]);
    /// let json = serde_json::to_string(&v)?;
    /// assert_eq!(json, "[1.5,2.0]");
    /// assert_eq!(serde_json::from_str::<Vector<f32>>(&json)?, v);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let data = self.try_as_slice().map_err(serde::ser::Error::custom)?;
        data.serialize(s)
    }
}

impl<'de, T: DeviceType + Deserialize<'de>> Deserialize<'de> for Vector<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Vector::from_vec(Vec::<T>::deserialize(d)?))
    }
}

#[derive(Serialize)]
struct MatrixRef<'a, T> {
    rows: usize,
    cols: usize,
    data: &'a [T],
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MatrixOwned<T> {
    rows: usize,
    cols: usize,
    data: Vec<T>,
}

impl<T: DeviceType + Serialize> Serialize for Matrix<T> {
    /// `{ "rows": r, "cols": c, "data": [..] }`, `data` in row-major order.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::from([[1u8, 2, 3], [4, 5, 6]]);
    /// let json = serde_json::to_string(&m)?;
    /// assert_eq!(json, r#"{"rows":2,"cols":3,"data":[1,2,3,4,5,6]}"#);
    /// assert_eq!(serde_json::from_str::<Matrix<u8>>(&json)?, m);
    /// let bad = serde_json::from_str::<Matrix<u8>>(r#"{"rows":2,"cols":2,"data":[1]}"#);
    /// assert!(bad.unwrap_err().to_string().contains("2x2"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let data = self.try_as_slice().map_err(serde::ser::Error::custom)?;
        MatrixRef {
            rows: self.rows(),
            cols: self.cols(),
            data,
        }
        .serialize(s)
    }
}

impl<'de, T: DeviceType + Deserialize<'de>> Deserialize<'de> for Matrix<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let m = MatrixOwned::<T>::deserialize(d)?;
        Matrix::from_vec(m.rows, m.cols, m.data).map_err(D::Error::custom)
    }
}

#[derive(Serialize)]
struct TensorRef<'a, T> {
    d0: usize,
    d1: usize,
    d2: usize,
    data: &'a [T],
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TensorOwned<T> {
    d0: usize,
    d1: usize,
    d2: usize,
    data: Vec<T>,
}

impl<T: DeviceType + Serialize> Serialize for Tensor3<T> {
    /// `{ "d0": a, "d1": b, "d2": c, "data": [..] }`, `data` in row-major order (`d2`
    /// fastest).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let t = Tensor3::from_vec(1, 2, 2, vec![1i32, 2, 3, 4])?;
    /// let json = serde_json::to_string(&t)?;
    /// assert_eq!(json, r#"{"d0":1,"d1":2,"d2":2,"data":[1,2,3,4]}"#);
    /// assert_eq!(serde_json::from_str::<Tensor3<i32>>(&json)?, t);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let data = self.try_as_slice().map_err(serde::ser::Error::custom)?;
        let (d0, d1, d2) = self.dims();
        TensorRef { d0, d1, d2, data }.serialize(s)
    }
}

impl<'de, T: DeviceType + Deserialize<'de>> Deserialize<'de> for Tensor3<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let t = TensorOwned::<T>::deserialize(d)?;
        Tensor3::from_vec(t.d0, t.d1, t.d2, t.data).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structs_and_empty_containers_round_trip() {
        let v: Vector<u64> = Vector::default();
        let back: Vector<u64> = serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap();
        assert!(back.is_empty());
        let m: Matrix<f64> = Matrix::zeroed(3, 0);
        let back: Matrix<f64> = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!((back.rows(), back.cols()), (3, 0));
        let m = Matrix::from_fn(5, 7, |r, c| (r as f32 - 2.5) * c as f32);
        let back: Matrix<f32> = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
        assert!(
            serde_json::from_str::<Matrix<f32>>(r#"{"rows":1,"cols":1,"data":[1],"x":0}"#).is_err()
        );
    }

    #[test]
    fn tensors_and_pixels_round_trip() {
        let t = Tensor3::from_fn(2, 3, 5, |i, j, k| (i * 100 + j * 10 + k) as u16);
        let back: Tensor3<u16> = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
        let empty: Tensor3<f32> = Tensor3::zeroed(0, 4, 4);
        let back: Tensor3<f32> =
            serde_json::from_str(&serde_json::to_string(&empty).unwrap()).unwrap();
        assert_eq!(back.dims(), (0, 4, 4));
        let bad = r#"{"d0":2,"d1":2,"d2":2,"data":[1,2,3]}"#;
        assert!(serde_json::from_str::<Tensor3<u8>>(bad).is_err());
        let px = crate::Rgba8::new(1, 2, 3, 4);
        let json = serde_json::to_string(&px).unwrap();
        assert_eq!(json, r#"{"r":1,"g":2,"b":3,"a":4}"#);
        assert_eq!(serde_json::from_str::<crate::Rgba8>(&json).unwrap(), px);
    }
}
